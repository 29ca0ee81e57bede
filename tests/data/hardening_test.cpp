// Hardening of the file parsers (docs/hardening.md): headers that claim more data than any file
// holds, values beyond the column's or the bbox's type, images whose header claims billions of
// pixels. Each is an error naming the file and what is wrong, found before anything large is
// allocated; never undefined behaviour or an out-of-memory kill. (tests/fuzz replays the inputs
// that found these; this file checks the messages.)
#include <gtest/gtest.h>

#include "data_util.h"
#include "spore/data/dataset.h"
#include "spore/data/vision.h"

using namespace spore;
using namespace spore::testing_data;

namespace {

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

TEST(ParserHardening, IdxDimsBeyondTheFileAreAnErrorNotAnAllocation) {
  TempDir d;
  write_file(d / "train-labels-idx1-ubyte", std::string("\0\0\x08\x01", 4) + be32(2) + "\x01\x02");
  write_file(d / "train-images-idx3-ubyte", std::string("\0\0\x08\x03", 4) + be32(0xffffffff) +
                                                be32(0xffffffff) + be32(0xffffffff) + "abc");
  std::string msg = error_of([&] { data::MnistDataset(d.str(), "train"); });
  EXPECT_NE(msg.find("dims (4294967295, 4294967295, 4294967295) are too large for any IDX file"),
            std::string::npos)
      << msg;
  // 2^48 bytes claimed, 3 there: truncated, found without allocating 256 TiB.
  write_file(d / "train-images-idx3-ubyte",
             std::string("\0\0\x08\x03", 4) + be32(65536) + be32(65536) + be32(65536) + "abc");
  msg = error_of([&] { data::MnistDataset(d.str(), "train"); });
  EXPECT_NE(
      msg.find(
          "is truncated: dims (65536, 65536, 65536) need 281474976710656 bytes of data, found 3"),
      std::string::npos)
      << msg;
  write_file(d / "train-images-idx3-ubyte",
             std::string("\0\0\x08\x03", 4) + be32(0) + be32(0xffffffff) + be32(0xffffffff));
  msg = error_of([&] { data::MnistDataset(d.str(), "train"); });
  EXPECT_NE(msg.find("are too large for any IDX file"), std::string::npos) << msg;
  // A count that is merely larger than the data: truncated, with both numbers.
  write_file(d / "train-images-idx3-ubyte",
             std::string("\0\0\x08\x03", 4) + be32(1000) + be32(28) + be32(28) + "xy");
  msg = error_of([&] { data::MnistDataset(d.str(), "train"); });
  EXPECT_NE(msg.find("need 784000 bytes of data, found 2"), std::string::npos) << msg;
}

TEST(ParserHardening, CsvFloatBeyondFloat32IsAnError) {
  TempDir d;
  write_file(d / "a.csv", "i,f\n1,1e300\n");
  data::CSVOptions o;
  o.column_defaults = {int64_t(0), 0.0};
  const std::string msg = error_of([&] { data::CSVDataset({d / "a.csv"}, o); });
  EXPECT_NE(msg.find("a.csv:2, column \"f\": \"1e300\" is out of float32's range"),
            std::string::npos)
      << msg;
  // inf and nan stay readable
  write_file(d / "b.csv", "i,f\n1,inf\n2,nan\n");
  EXPECT_EQ(data::CSVDataset({d / "b.csv"}, o).get_dataset_size(), 2);
  o.column_defaults = {int64_t(1) << 40, 0.0};
  EXPECT_NE(error_of([&] { data::CSVDataset({d / "b.csv"}, o); }).find("does not fit int32"),
            std::string::npos);
}

TEST(ParserHardening, CocoValuesBeyondTheirTypesAreErrors) {
  TempDir d;
  write_file(d / "a.json", R"({"images":[{"id":1,"file_name":"x.jpg"}],
    "annotations":[{"image_id":1,"category_id":1,"bbox":[1e300,0,1,1]}]})");
  std::string msg = error_of([&] { data::CocoDataset(d.str(), d / "a.json"); });
  EXPECT_NE(msg.find("field \"bbox\": width and height must be finite"), std::string::npos) << msg;
  write_file(d / "b.json", R"({"images":[{"id":1,"file_name":"x.jpg"}],
    "annotations":[{"image_id":1,"category_id":1099511627776,"bbox":[0,0,1,1]}]})");
  msg = error_of([&] { data::CocoDataset(d.str(), d / "b.json"); });
  EXPECT_NE(msg.find("category id 1099511627776 does not fit int32"), std::string::npos) << msg;
}

TEST(ParserHardening, JpegHeaderClaimingBillionsOfPixelsIsAnError) {
  Tensor img = Tensor::empty({7, 9, 3}, kUInt8);
  for (int64_t k = 0; k < img.numel(); ++k) img.data<uint8_t>()[k] = uint8_t(k * 13);
  Tensor jpg = vision::encode_image(img, ".jpg", 90).contiguous();
  auto* b = static_cast<uint8_t*>(jpg.data_ptr());
  int64_t sof = -1;
  for (int64_t i = 0; i + 1 < jpg.numel(); ++i)
    if (b[i] == 0xFF && b[i + 1] == 0xC0) sof = i;
  ASSERT_GE(sof, 0);
  b[sof + 5] = b[sof + 7] = 0xFF;  // height and width 65500-ish
  b[sof + 6] = b[sof + 8] = 0xDC;
  const std::string msg = error_of([&] { vision::Decode()(jpg); });
  EXPECT_NE(msg.find("65500x65500 pixels, more than the decoder's limit"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("OPENCV_IO_MAX_IMAGE_PIXELS"), std::string::npos) << msg;
}

}  // namespace
