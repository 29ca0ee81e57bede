// Geometric transforms checked against index arithmetic: flips, crop offsets, pad modes on a tiny
// image (numpy's pad as the reference, written out by hand), Rotate by 90 degrees vs transpose +
// flip, Resize sizes, HWC2CHW layout, CutOut, and determinism of the random ones given a seed.
#include <gtest/gtest.h>

#include "tests/data/vision_util.h"

using namespace spore;
using vt::at;

TEST(VisionGeometry, FlipsByIndexArithmetic) {
  const Tensor img = vt::index_image(4, 5, 3);
  const Tensor h = vision::HorizontalFlip()(img), v = vision::VerticalFlip()(img);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 5; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(at(h, y, x, c), at(img, y, 4 - x, c));
        EXPECT_EQ(at(v, y, x, c), at(img, 3 - y, x, c));
      }
  EXPECT_TRUE(vt::same(vision::RandomHorizontalFlip(1.0)(img), h));
  EXPECT_TRUE(vt::same(vision::RandomHorizontalFlip(0.0)(img), img));
  EXPECT_TRUE(vt::same(vision::RandomVerticalFlip(1.0)(img), v));
  // Float images and a rank-2 (H, W) image.
  const Tensor f = vt::make_image(
      2, 3, 1, [](int64_t y, int64_t x, int64_t) { return y * 3 + x + 0.5; }, kFloat32);
  EXPECT_EQ(vt::values<float>(vision::HorizontalFlip()(f)),
            (std::vector<float>{2.5, 1.5, 0.5, 5.5, 4.5, 3.5}));
  const Tensor g = f.reshape({2, 3});
  EXPECT_EQ(vision::VerticalFlip()(g).shape(), (Shape{2, 3}));
}

TEST(VisionGeometry, RandomFlipUsesTheSampleRng) {
  const Tensor img = vt::index_image(3, 4, 1);
  const auto op = vision::RandomHorizontalFlip(0.5);
  int flipped = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    const Tensor a = vt::seeded(op, img, s), b = vt::seeded(op, img, s);
    EXPECT_TRUE(vt::same(a, b));
    flipped += !vt::same(a, img);
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
}

TEST(VisionGeometry, CenterCropOffsets) {
  const Tensor img = vt::index_image(6, 7, 2);
  const Tensor c = vision::CenterCrop({2, 3})(img);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 2}));
  // top = (6 - 2) / 2 = 2, left = (7 - 3) / 2 = 2
  for (int64_t y = 0; y < 2; ++y)
    for (int64_t x = 0; x < 3; ++x) EXPECT_EQ(at(c, y, x, 1), at(img, y + 2, x + 2, 1));
  // Larger than the image: zero padding around it.
  const Tensor big =
      vision::CenterCrop({4})(vt::make_image(2, 2, 1, [](int64_t, int64_t, int64_t) { return 9; }));
  EXPECT_EQ(vt::values<uint8_t>(big),
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 9, 9, 0, 0, 9, 9, 0, 0, 0, 0, 0}));
}

TEST(VisionGeometry, RandomCropIsASubWindowAndDeterministic) {
  const Tensor img = vt::index_image(8, 8, 1);
  const auto op = vision::RandomCrop({3, 4});
  bool moved = false;
  for (uint64_t s = 0; s < 20; ++s) {
    const Tensor c = vt::seeded(op, img, s);
    ASSERT_EQ(c.shape(), (Shape{3, 4, 1}));
    EXPECT_TRUE(vt::same(c, vt::seeded(op, img, s)));
    // index image: value = y * 8 + x, so the top-left value gives the offset.
    const int64_t top = int64_t(at(c, 0, 0)) / 8, left = int64_t(at(c, 0, 0)) % 8;
    EXPECT_LE(top, 5);
    EXPECT_LE(left, 4);
    moved = moved || top || left;
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x) EXPECT_EQ(at(c, y, x), at(img, top + y, left + x));
  }
  EXPECT_TRUE(moved);
  // Too large without padding: an error that says what to do.
  EXPECT_NE(vt::error_of([&] {
              vision::RandomCrop({9, 9})(img);
            }).find("pad_if_needed"),
            std::string::npos);
  // pad_if_needed pads both sides by the shortfall.
  const Tensor p =
      vt::seeded(vision::RandomCrop({10, 8}, {.pad_if_needed = true, .fill = {7}}), img, 1);
  EXPECT_EQ(p.shape(), (Shape{10, 8, 1}));
  // padding: 2 on every side, then an 8x8 crop of the 12x12 image.
  const Tensor q = vt::seeded(vision::RandomCrop({12}, {.padding = {2}, .fill = {255}}), img, 3);
  EXPECT_EQ(at(q, 0, 0), 255);
  EXPECT_EQ(at(q, 2, 2), at(img, 0, 0));
}

TEST(VisionGeometry, PadModesOnATinyImage) {
  // One row [1, 2, 3]; numpy.pad(..., 2, mode) along the width.
  const Tensor row =
      vt::make_image(1, 3, 1, [](int64_t, int64_t x, int64_t) { return double(x + 1); });
  auto padded = [&](vision::Border mode) {
    return vt::values<uint8_t>(vision::Pad({2, 0}, {9}, mode)(row));
  };
  EXPECT_EQ(padded(vision::Border::Constant), (std::vector<uint8_t>{9, 9, 1, 2, 3, 9, 9}));
  EXPECT_EQ(padded(vision::Border::Edge), (std::vector<uint8_t>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(padded(vision::Border::Reflect), (std::vector<uint8_t>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(padded(vision::Border::Symmetric), (std::vector<uint8_t>{2, 1, 1, 2, 3, 3, 2}));
  // Wider than the image keeps mirroring: numpy.pad([1, 2, 3], 4, 'reflect').
  EXPECT_EQ(vt::values<uint8_t>(vision::Pad({4, 0}, {0}, vision::Border::Reflect)(row)),
            (std::vector<uint8_t>{1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}));
  // {left, top, right, bottom} and per-channel fill.
  const Tensor img = vt::make_image(1, 1, 2, [](int64_t, int64_t, int64_t c) { return 50 + c; });
  const Tensor p = vision::Pad({1, 0, 0, 1}, {7, 8})(img);
  ASSERT_EQ(p.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vt::values<uint8_t>(p), (std::vector<uint8_t>{7, 8, 50, 51, 7, 8, 7, 8}));
  EXPECT_NE(vt::error_of([&] {
              vision::Pad({1}, {1, 2, 3})(img);
            }).find("fill has 3 values"),
            std::string::npos);
}

TEST(VisionGeometry, Rotate90IsTransposeAndFlip) {
  const Tensor img = vt::index_image(4, 6, 3);
  // Counter-clockwise by 90 (numpy.rot90): out[y][x] = in[x][W - 1 - y], shape (W, H).
  const Tensor r = vision::Rotate(90, vision::Inter::Nearest, true)(img);
  ASSERT_EQ(r.shape(), (Shape{6, 4, 3}));
  for (int64_t y = 0; y < 6; ++y)
    for (int64_t x = 0; x < 4; ++x)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(at(r, y, x, c), at(img, x, 5 - y, c)) << y << "," << x;
  // Linear interpolation is exact at 90 degrees too; -90 is clockwise: out[y][x] = in[H - 1 -
  // x][y].
  const Tensor sq = vt::index_image(5, 5, 1);
  const Tensor cw = vision::Rotate(-90, vision::Inter::Linear)(sq);
  for (int64_t y = 0; y < 5; ++y)
    for (int64_t x = 0; x < 5; ++x) EXPECT_EQ(at(cw, y, x), at(sq, 4 - x, y));
  // 180 on a non-square image without expand.
  const Tensor r180 = vision::Rotate(180)(img);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 6; ++x) EXPECT_EQ(at(r180, y, x, 1), at(img, 3 - y, 5 - x, 1));
  // 45 degrees with expand grows the canvas to hold the corners.
  EXPECT_EQ(vision::Rotate(45, vision::Inter::Linear, true)(vt::index_image(10, 10, 1)).shape(),
            (Shape{15, 15, 1}));
}

TEST(VisionGeometry, ResizeSizesAndModes) {
  const Tensor img = vt::make_image(20, 40, 3, [](int64_t y, int64_t x, int64_t) { return x + y; });
  EXPECT_EQ(vision::Resize({10, 15})(img).shape(), (Shape{10, 15, 3}));
  EXPECT_EQ(vision::Resize({10})(img).shape(), (Shape{10, 20, 3}));  // shorter side
  for (auto m : {vision::Inter::Linear, vision::Inter::Nearest, vision::Inter::Cubic,
                 vision::Inter::Area, vision::Inter::Lanczos}) {
    const Tensor r = vision::Resize({40, 80}, m)(img);
    EXPECT_EQ(r.shape(), (Shape{40, 80, 3}));
  }
  // Nearest 2x upscaling repeats pixels.
  const Tensor n = vision::Resize({40, 80}, vision::Inter::Nearest)(img);
  EXPECT_EQ(at(n, 7, 9), at(img, 3, 4));
  // Float images stay float; a constant image stays constant.
  const Tensor f = vt::make_image(
      5, 5, 1, [](int64_t, int64_t, int64_t) { return 0.25; }, kFloat32);
  const Tensor rf = vision::Resize({3, 7}, vision::Inter::Cubic)(f);
  EXPECT_EQ(rf.dtype(), kFloat32);
  EXPECT_NEAR(at(rf, 1, 3), 0.25, 1e-6);
  EXPECT_NE(vt::error_of([&] {
              vision::Resize({4})(Tensor::empty({4, 4, 3}, kInt32));
            }).find("TypeCast"),
            std::string::npos);
}

TEST(VisionGeometry, RandomResizedCropShapesAndDeterminism) {
  const Tensor img = vt::make_image(
      60, 80, 3, [](int64_t y, int64_t x, int64_t c) { return (x * 3 + y + c) % 256; });
  const auto op = vision::RandomResizedCrop({32, 24});
  for (uint64_t s = 0; s < 10; ++s) {
    const Tensor a = vt::seeded(op, img, s);
    EXPECT_EQ(a.shape(), (Shape{32, 24, 3}));
    EXPECT_TRUE(vt::same(a, vt::seeded(op, img, s)));
  }
  EXPECT_FALSE(vt::same(vt::seeded(op, img, 1), vt::seeded(op, img, 2)));
  // scale {1, 1} and the image's own ratio: the whole image, just resized.
  const auto whole = vision::RandomResizedCrop({30, 40}, {1, 1}, {80.0 / 60, 80.0 / 60});
  EXPECT_TRUE(vt::same(vt::seeded(whole, img, 5), vision::Resize({30, 40})(img)));
}

TEST(VisionGeometry, RandomAffineIdentityAndTranslation) {
  const Tensor img = vt::index_image(6, 6, 1);
  EXPECT_TRUE(vt::same(vt::seeded(vision::RandomAffine({}), img, 1), img));
  // Pure translation by up to 50%: the content moves by an integer (dx, dy); check one pixel.
  const auto op = vision::RandomAffine({.degrees = {0}, .translate = {0.5, 0.5}, .fill = {200}});
  for (uint64_t s = 0; s < 10; ++s) {
    const Tensor out = vt::seeded(op, img, s);
    // Find where pixel (0, 0) (value 0) went: index image values are unique except the fill.
    int64_t found = 0;
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < 6; ++x)
        if (at(out, y, x) != 200) {
          const int64_t v = int64_t(at(out, y, x));
          const int64_t dy = y - v / 6, dx = x - v % 6;
          EXPECT_LE(std::abs(dx), 3);
          EXPECT_LE(std::abs(dy), 3);
          ++found;
        }
    EXPECT_GT(found, 0);
  }
}

TEST(VisionGeometry, CutOut) {
  const Tensor img = vt::make_image(10, 10, 3, [](int64_t, int64_t, int64_t) { return 100; });
  const Tensor c = vt::seeded(vision::CutOut(4, 1), img, 7);
  int64_t zeros = 0;
  for (uint8_t v : vt::values<uint8_t>(c)) zeros += v == 0;
  EXPECT_EQ(zeros, 4 * 4 * 3);
  const auto b = vt::bright_bbox(c, 50);  // the whole image is bright except the patch
  EXPECT_EQ(b[2] - b[0], 10);
  EXPECT_TRUE(vt::same(c, vt::seeded(vision::CutOut(4, 1), img, 7)));
  EXPECT_EQ(vt::values<uint8_t>(img)[0], 100);  // the input is untouched
}

TEST(VisionGeometry, HWC2CHWLayout) {
  const Tensor img = vt::index_image(2, 3, 4);
  const Tensor chw = vision::HWC2CHW()(img).contiguous();
  ASSERT_EQ(chw.shape(), (Shape{4, 2, 3}));
  const std::vector<uint8_t> v = vt::values<uint8_t>(chw);
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t y = 0; y < 2; ++y)
      for (int64_t x = 0; x < 3; ++x) EXPECT_EQ(v[size_t((c * 2 + y) * 3 + x)], at(img, y, x, c));
}
