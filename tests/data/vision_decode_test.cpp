// Decode, DecodeResize and encode_image: PNG round trips exactly, JPEG closely; corrupt, truncated
// and non-image data raise spore::Error naming the problem; DecodeResize matches Decode + Resize.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/data/vision_util.h"

using namespace spore;
using vt::at;

namespace {

// A smooth RGB test image (JPEG-friendly: low frequencies only).
Tensor smooth_image(int64_t h, int64_t w) {
  return vt::make_image(h, w, 3, [=](int64_t y, int64_t x, int64_t c) {
    return 128 + 100 * std::sin(0.02 * double(x) * double(c + 1) + 0.03 * double(y));
  });
}

Tensor truncate(const Tensor& bytes, int64_t n) {
  return from_buffer(bytes.data_ptr(), {n}, kUInt8);
}

}  // namespace

TEST(VisionDecode, PngRoundTripIsExact) {
  const Tensor img = vt::index_image(5, 7, 3);
  const Tensor png = vision::encode_image(img, ".png");
  EXPECT_FALSE(vision::is_jpeg(png));
  const Tensor back = vision::Decode()(png);
  EXPECT_TRUE(vt::same(back, img));
}

TEST(VisionDecode, JpegRoundTripIsClose) {
  const Tensor img = smooth_image(48, 64);
  const Tensor jpg = vision::encode_image(img, ".jpg", 95);
  EXPECT_TRUE(vision::is_jpeg(jpg));
  const Tensor back = vision::Decode()(jpg);
  ASSERT_EQ(back.shape(), (Shape{48, 64, 3}));
  EXPECT_EQ(back.dtype(), kUInt8);
  EXPECT_LT(vt::mean_abs_diff(back, img), 3.0);
  // Channel order is RGB: a pure red image decodes with R high, B low.
  const Tensor red =
      vt::make_image(16, 16, 3, [](int64_t, int64_t, int64_t c) { return c == 0 ? 250 : 5; });
  const Tensor r = vision::Decode()(vision::encode_image(red, ".jpg"));
  EXPECT_GT(at(r, 8, 8, 0), 200);
  EXPECT_LT(at(r, 8, 8, 2), 50);
}

TEST(VisionDecode, GrayJpegDecodesToRgb) {
  const Tensor gray = vt::make_image(16, 16, 1, [](int64_t y, int64_t, int64_t) { return 10 * y; });
  const Tensor out = vision::Decode()(vision::encode_image(gray, ".jpg"));
  ASSERT_EQ(out.shape(), (Shape{16, 16, 3}));
  EXPECT_NEAR(at(out, 5, 3, 0), 50, 4);
  EXPECT_EQ(at(out, 5, 3, 0), at(out, 5, 3, 2));
}

TEST(VisionDecode, TruncatedJpegIsAnError) {
  const Tensor jpg = vision::encode_image(smooth_image(64, 64), ".jpg");
  const std::string msg = vt::error_of([&] { vision::Decode()(truncate(jpg, jpg.numel() / 2)); });
  EXPECT_NE(msg.find("[vision.Decode]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("JPEG"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // Only the header left.
  const std::string msg2 = vt::error_of([&] { vision::Decode()(truncate(jpg, 20)); });
  EXPECT_NE(msg2.find("JPEG"), std::string::npos) << msg2;
}

TEST(VisionDecode, CorruptJpegIsAnError) {
  Tensor jpg = vision::encode_image(smooth_image(64, 64), ".jpg").clone();
  // Keep the SOI marker, scramble everything after it.
  uint8_t* p = jpg.data<uint8_t>();
  for (int64_t i = 3; i < jpg.numel(); ++i) p[i] = uint8_t(i * 37 + 11);
  const std::string msg = vt::error_of([&] { vision::Decode()(jpg); });
  EXPECT_NE(msg.find("[vision.Decode]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("JPEG"), std::string::npos) << msg;
}

TEST(VisionDecode, TruncatedAndCorruptPngAreErrors) {
  const Tensor png = vision::encode_image(vt::index_image(8, 8, 3), ".png");
  const std::string msg = vt::error_of([&] { vision::Decode()(truncate(png, png.numel() - 20)); });
  EXPECT_NE(msg.find("truncated PNG"), std::string::npos) << msg;
  Tensor bad = png.clone();
  uint8_t* p = bad.data<uint8_t>();
  for (int64_t i = 8; i < bad.numel() - 12; ++i) p[i] = uint8_t(i * 13);
  const std::string msg2 = vt::error_of([&] { vision::Decode()(bad); });
  EXPECT_NE(msg2.find("[vision.Decode]"), std::string::npos) << msg2;
}

TEST(VisionDecode, NotImageBytesAreErrors) {
  const Tensor junk = from_vector<uint8_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {10});
  const std::string junk_msg = vt::error_of([&] { vision::Decode()(junk); });
  EXPECT_NE(
      junk_msg.find("unsupported or corrupt image (10 bytes, starting 01 02 03 04 05 06 07 08)"),
      std::string::npos)
      << junk_msg;
  EXPECT_NE(junk_msg.find("JPEG, PNG, BMP, TIFF, WebP and PNM"), std::string::npos) << junk_msg;
  EXPECT_NE(vt::error_of([&] { vision::Decode()(Tensor::empty({0}, kUInt8)); }).find("0 bytes"),
            std::string::npos);
  const std::string msg = vt::error_of([&] { vision::Decode()(vt::index_image(4, 4, 3)); });
  EXPECT_NE(msg.find("decoded already"), std::string::npos) << msg;
}

TEST(VisionDecodeResize, MatchesDecodeThenResize) {
  const Tensor img = smooth_image(768, 1024);
  const Tensor jpg = vision::encode_image(img, ".jpg", 90);
  for (std::vector<int64_t> size :
       {std::vector<int64_t>{224, 224}, {100, 150}, {500, 700}, {768, 1024}}) {
    const Tensor fused = vision::DecodeResize(size)(jpg);
    const Tensor ref = vision::Resize(size)(vision::Decode()(jpg));
    ASSERT_EQ(fused.shape(), (Shape{size[0], size[1], 3}));
    EXPECT_LT(vt::mean_abs_diff(fused, ref), 2.0) << size[0] << "x" << size[1];
  }
  // Shorter-side size, like Resize({s}).
  EXPECT_EQ(vision::DecodeResize({96})(jpg).shape(), (Shape{96, 128, 3}));
}

TEST(VisionDecodeResize, PngFallsBackToDecodeAndResize) {
  const Tensor png = vision::encode_image(vt::index_image(8, 8, 3), ".png");
  EXPECT_TRUE(
      vt::same(vision::DecodeResize({4, 4})(png), vision::Resize({4, 4})(vision::Decode()(png))));
}

TEST(VisionDecodeResize, TruncatedJpegIsAnError) {
  const Tensor jpg = vision::encode_image(smooth_image(256, 256), ".jpg");
  const std::string msg = vt::error_of([&] {
    vision::DecodeResize({32, 32})(truncate(jpg, jpg.numel() - 100));
  });
  EXPECT_NE(msg.find("[vision.DecodeResize]"), std::string::npos) << msg;
}

TEST(VisionRandomCropDecodeResize, MatchesDecodeThenRandomResizedCrop) {
  const Tensor jpg = vision::encode_image(smooth_image(375, 500), ".jpg", 90);
  const auto fused = vision::RandomCropDecodeResize({64, 64});
  const auto rrc = vision::RandomResizedCrop({64, 64});
  const Tensor full = vision::Decode()(jpg);
  for (uint64_t s = 0; s < 8; ++s) {
    const Tensor a = vt::seeded(fused, jpg, s), b = vt::seeded(rrc, full, s);
    ASSERT_EQ(a.shape(), (Shape{64, 64, 3}));
    EXPECT_LT(vt::mean_abs_diff(a, b), 4.0) << "seed " << s;
    EXPECT_TRUE(vt::same(a, vt::seeded(fused, jpg, s)));
  }
  const Tensor png = vision::encode_image(vt::index_image(8, 8, 3), ".png");
  EXPECT_TRUE(vt::same(vt::seeded(vision::RandomCropDecodeResize({4, 4}), png, 2),
                       vt::seeded(vision::RandomResizedCrop({4, 4}), vision::Decode()(png), 2)));
}
