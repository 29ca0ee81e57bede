// Color and value transforms: ConvertColor channel maths, the ColorJitter family (factor 1 is the
// identity; brightness / saturation / hue against hand-computed values), Normalize in both layouts.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/data/vision_util.h"

using namespace spore;
using vt::at;

namespace {
Tensor colorful(DType dt = kUInt8) {
  const double scale = dt == kUInt8 ? 1 : 1 / 255.0;
  return vt::make_image(
      6, 7, 3,
      [=](int64_t y, int64_t x, int64_t c) {
        return scale * double((y * 37 + x * 23 + c * 71) % 256);
      },
      dt);
}
}  // namespace

TEST(VisionColor, ConvertColor) {
  const Tensor img = colorful();
  const Tensor bgr = vision::ConvertColor(vision::ColorConversion::RGB2BGR)(img);
  for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(at(bgr, 2, 3, c), at(img, 2, 3, 2 - c));
  const Tensor gray = vision::ConvertColor(vision::ColorConversion::RGB2GRAY)(img);
  ASSERT_EQ(gray.shape(), (Shape{6, 7, 1}));
  const double expect =
      0.299 * at(img, 4, 5, 0) + 0.587 * at(img, 4, 5, 1) + 0.114 * at(img, 4, 5, 2);
  EXPECT_NEAR(at(gray, 4, 5), expect, 1.0);
  const Tensor rgba = vision::ConvertColor(vision::ColorConversion::RGB2RGBA)(img);
  EXPECT_EQ(rgba.shape(), (Shape{6, 7, 4}));
  EXPECT_EQ(at(rgba, 1, 1, 3), 255);
  // HSV of pure red: H = 0, S = V = 255 (OpenCV's uint8 ranges).
  const Tensor red =
      vt::make_image(1, 1, 3, [](int64_t, int64_t, int64_t c) { return c == 0 ? 255 : 0; });
  const Tensor hsv = vision::ConvertColor(vision::ColorConversion::RGB2HSV)(red);
  EXPECT_EQ(vt::values<uint8_t>(hsv), (std::vector<uint8_t>{0, 255, 255}));
  EXPECT_NE(vt::error_of([&] {
              vision::ConvertColor(vision::ColorConversion::GRAY2RGB)(img);
            }).find("expects 1"),
            std::string::npos);
}

TEST(VisionColor, FactorOneIsIdentity) {
  for (DType dt : {kUInt8, kFloat32}) {
    const Tensor img = colorful(dt);
    EXPECT_TRUE(vt::same(vision::AdjustBrightness(1)(img), img));
    EXPECT_TRUE(vt::same(vision::AdjustContrast(1)(img), img));
    EXPECT_TRUE(vt::same(vision::AdjustSaturation(1)(img), img));
    EXPECT_TRUE(vt::same(vision::AdjustHue(0)(img), img));
    EXPECT_TRUE(vt::same(vt::seeded(vision::RandomColorAdjust({0}, {0}, {0}, {0}), img, 3), img));
    EXPECT_TRUE(vt::same(
        vt::seeded(vision::RandomColorAdjust({1, 1}, {1, 1}, {1, 1}, {0, 0}), img, 3), img));
  }
}

TEST(VisionColor, AdjustmentsMatchTheFormulas) {
  const Tensor img = colorful();
  const Tensor b = vision::AdjustBrightness(0.5)(img);
  EXPECT_EQ(at(b, 2, 2, 1), std::round(at(img, 2, 2, 1) * 0.5));
  const Tensor b2 = vision::AdjustBrightness(3)(img);
  EXPECT_EQ(at(b2, 2, 2, 1), std::min(255.0, std::round(at(img, 2, 2, 1) * 3)));
  // Saturation 0: every channel becomes the gray value.
  const Tensor g = vision::AdjustSaturation(0)(img);
  const double gray =
      0.299 * at(img, 1, 4, 0) + 0.587 * at(img, 1, 4, 1) + 0.114 * at(img, 1, 4, 2);
  for (int64_t c = 0; c < 3; ++c) EXPECT_NEAR(at(g, 1, 4, c), gray, 0.51);
  // Contrast 0: every pixel becomes the mean gray.
  const Tensor c0 = vision::AdjustContrast(0)(img);
  EXPECT_EQ(at(c0, 0, 0, 0), at(c0, 5, 6, 2));
  // Hue +1/3 turn maps red to green, green to blue.
  const Tensor rg =
      vt::make_image(1, 2, 3, [](int64_t, int64_t x, int64_t c) { return c == x ? 200 : 0; });
  const Tensor h = vision::AdjustHue(1.0 / 3)(rg);
  EXPECT_EQ(vt::values<uint8_t>(h), (std::vector<uint8_t>{0, 200, 0, 0, 0, 200}));
  // A half turn on floats maps (1, 0.5, 0) (hue 1/12) to (0, 0.5, 1) (hue 7/12).
  const Tensor o = vt::make_image(
      1, 1, 3, [](int64_t, int64_t, int64_t c) { return 1 - 0.5 * c; }, kFloat32);
  const std::vector<float> ho = vt::values<float>(vision::AdjustHue(0.5)(o));
  EXPECT_NEAR(ho[0], 0, 1e-6);
  EXPECT_NEAR(ho[1], 0.5, 1e-6);
  EXPECT_NEAR(ho[2], 1, 1e-6);
}

TEST(VisionColor, RandomColorAdjustIsDeterministicAndVaries) {
  const Tensor img = colorful();
  const auto op = vision::RandomColorAdjust({0.4}, {0.4}, {0.4}, {0.1});
  EXPECT_TRUE(vt::same(vt::seeded(op, img, 11), vt::seeded(op, img, 11)));
  EXPECT_FALSE(vt::same(vt::seeded(op, img, 11), vt::seeded(op, img, 12)));
  // Brightness only, in [0.5, 0.5]: exactly AdjustBrightness(0.5).
  EXPECT_TRUE(vt::same(vt::seeded(vision::RandomColorAdjust({0.5, 0.5}), img, 1),
                       vision::AdjustBrightness(0.5)(img)));
  EXPECT_NE(vt::error_of([] { vision::RandomColorAdjust({0}, {0}, {0}, {0.7}); }).find("hue"),
            std::string::npos);
}

TEST(VisionColor, NormalizeBothLayouts) {
  const Tensor img = colorful();
  const std::vector<double> mean = {10, 20, 30}, std = {2, 4, 5};
  const Tensor hwc = vision::Normalize(mean, std, true)(img);
  EXPECT_EQ(hwc.dtype(), kFloat32);
  ASSERT_EQ(hwc.shape(), img.shape());
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_FLOAT_EQ(float(at(hwc, 3, 2, c)),
                    float((at(img, 3, 2, c) - mean[size_t(c)]) / std[size_t(c)]));
  const Tensor chw_in = vision::HWC2CHW()(img);
  const Tensor chw = vision::Normalize(mean, std, false)(chw_in);
  const Tensor back = vision::HWC2CHW()(hwc).contiguous();
  EXPECT_EQ(vt::values<float>(chw), vt::values<float>(back));
  EXPECT_NE(vt::error_of([&] {
              vision::Normalize({1, 2}, {1, 1}, true)(img);
            }).find("3 channels"),
            std::string::npos);
}
