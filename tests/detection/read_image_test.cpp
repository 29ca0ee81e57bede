// detection::read_image (spore predict's and YOLOv5 training's image reader): a header claiming
// more pixels than the decoder's limit is said in Spore's words, naming the file and the variable
// to set (OpenCV's assertion text, which names its internal macro, was shown before).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "spore/detection/detection.h"
#include "test_util.h"

namespace spore {
namespace {

namespace fs = std::filesystem;

TEST(ReadImage, HugeHeaderIsSaidInSporesWords) {
  const fs::path d = fs::temp_directory_path() / ("spore_read_image_" + std::to_string(::getpid()));
  fs::create_directories(d);
  const std::string ok = (d / "ok.jpg").string(), huge = (d / "huge.jpg").string();
  detection::write_image(ok, zeros({12, 16, 3}, kUInt8));
  EXPECT_EQ(detection::read_image(ok).shape(), (Shape{12, 16, 3}));
  std::stringstream ss;
  ss << std::ifstream(ok, std::ios::binary).rdbuf();
  std::string b = ss.str();
  const size_t sof = b.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  b[sof + 5] = b[sof + 7] = char(0xff);  // height and width 65500-ish
  b[sof + 6] = b[sof + 8] = char(0xdc);
  std::ofstream(huge, std::ios::binary) << b;
  const std::string e = test::error_of([&] { detection::read_image(huge); });
  EXPECT_NE(e.find(huge + " claims more pixels than the decoder's limit"), std::string::npos) << e;
  EXPECT_NE(e.find("OPENCV_IO_MAX_IMAGE_PIXELS"), std::string::npos) << e;
  EXPECT_EQ(e.find("Assertion failed"), std::string::npos) << e;
  fs::remove_all(d);
}

}  // namespace
}  // namespace spore
