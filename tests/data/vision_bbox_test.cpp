// Detection transforms checked geometrically: paint a white rectangle where the box is, transform,
// and check the transformed box covers the transformed white region (Letterbox, flip, affine);
// Mosaic's box placement is checked against the white pixels of the canvas.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/data/vision_util.h"

using namespace spore;
using vt::at;

namespace {

struct B {
  double x, y, w, h;
};

// (h, w, 3) image of `bg` with white (255) rectangles at the boxes; row {image, bboxes, labels,
// a non-per-box column}.
data::Row scene(int64_t h, int64_t w, const std::vector<B>& boxes, double bg = 0) {
  Tensor img = vt::make_image(h, w, 3, [&](int64_t y, int64_t x, int64_t) {
    for (const B& b : boxes)
      if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h) return 255.0;
    return bg;
  });
  std::vector<float> bv;
  std::vector<int32_t> labels;
  for (size_t i = 0; i < boxes.size(); ++i) {
    bv.insert(bv.end(),
              {float(boxes[i].x), float(boxes[i].y), float(boxes[i].w), float(boxes[i].h)});
    labels.push_back(int32_t(i + 1));
  }
  return {img, from_vector<float>(bv, {int64_t(boxes.size()), 4}),
          from_vector<int32_t>(labels, {int64_t(boxes.size())}),
          from_vector<int32_t>({7, 8, 9}, {3})};
}

std::vector<B> boxes_of(const Tensor& t) {
  std::vector<B> out;
  const std::vector<float> v = vt::values<float>(t);
  for (size_t i = 0; i + 3 < v.size(); i += 4) out.push_back({v[i], v[i + 1], v[i + 2], v[i + 3]});
  return out;
}

// The box matches the bright region within tol pixels on every side.
void expect_box_matches(const B& b, const std::array<double, 4>& r, double tol) {
  EXPECT_NEAR(b.x, r[0], tol);
  EXPECT_NEAR(b.y, r[1], tol);
  EXPECT_NEAR(b.x + b.w, r[2], tol);
  EXPECT_NEAR(b.y + b.h, r[3], tol);
}

}  // namespace

TEST(VisionBBox, LetterboxScalesAndShiftsBoxes) {
  const data::Row row = scene(40, 80, {{10, 5, 20, 10}});
  const data::Row out = vision::Letterbox({64, 64})(row);
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(out[0].shape(), (Shape{64, 64, 3}));
  // r = 0.8: resized to (32, 64), 16 rows of fill above and below.
  EXPECT_EQ(at(out[0], 0, 0), 114);
  EXPECT_EQ(at(out[0], 63, 63), 114);
  EXPECT_EQ(at(out[0], 16, 0), 0);
  const std::vector<B> b = boxes_of(out[1]);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FLOAT_EQ(float(b[0].x), 8);
  EXPECT_FLOAT_EQ(float(b[0].y), 20);
  EXPECT_FLOAT_EQ(float(b[0].w), 16);
  EXPECT_FLOAT_EQ(float(b[0].h), 8);
  expect_box_matches(b[0], vt::bright_bbox(out[0]), 1.0);
  EXPECT_TRUE(vt::same(out[2], row[2]));
  EXPECT_TRUE(vt::same(out[3], row[3]));
  // Tall image, odd padding, and no upscaling.
  const data::Row tall = scene(50, 20, {{2, 30, 10, 15}});
  const data::Row t2 = vision::Letterbox({80, 61}, 114, false)(tall);
  ASSERT_EQ(t2[0].shape(), (Shape{80, 61, 3}));
  expect_box_matches(boxes_of(t2[1])[0], vt::bright_bbox(t2[0]), 0.01);
}

TEST(VisionBBox, HorizontalFlipMovesBoxes) {
  const data::Row row = scene(30, 50, {{5, 4, 10, 6}, {30, 20, 20, 10}});
  const data::Row out = vision::RandomHorizontalFlipWithBBox(1.0)(row);
  const std::vector<B> b = boxes_of(out[1]);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_FLOAT_EQ(float(b[0].x), 35);
  EXPECT_FLOAT_EQ(float(b[1].x), 0);
  EXPECT_TRUE(vt::same(out[0], vision::HorizontalFlip()(row[0])));
  // Each flipped box is all white inside.
  for (const B& bb : b)
    for (int64_t y = int64_t(bb.y); y < int64_t(bb.y + bb.h); ++y)
      for (int64_t x = int64_t(bb.x); x < int64_t(bb.x + bb.w); ++x)
        ASSERT_EQ(at(out[0], y, x), 255);
  const data::Row same = vision::RandomHorizontalFlipWithBBox(0.0)(row);
  EXPECT_TRUE(vt::same(same[0], row[0]));
  EXPECT_TRUE(vt::same(same[1], row[1]));
}

TEST(VisionBBox, RandomAffineBoxesFollowThePixels) {
  const data::Row row = scene(64, 64, {{20, 24, 16, 12}});
  const auto op = vision::RandomAffineWithBBox(
      {.degrees = 20, .translate = 0.1, .scale = 0.3, .shear = 5, .fill = 0});
  int kept = 0;
  for (uint64_t s = 0; s < 30; ++s) {
    data::sample_rng().seed(s);
    const data::Row out = op(row);
    ASSERT_EQ(out[0].shape(), (Shape{64, 64, 3}));
    const std::vector<B> b = boxes_of(out[1]);
    if (b.empty()) continue;
    ++kept;
    ASSERT_EQ(b.size(), 1u);
    ASSERT_EQ(out[2].shape(), (Shape{1}));
    const auto r = vt::bright_bbox(out[0]);
    // The box encloses the white region (1 px of interpolation slack) and is at most a few pixels
    // larger (the rotated corners are thin tips that stay below the threshold).
    EXPECT_LE(b[0].x, r[0] + 1);
    EXPECT_LE(b[0].y, r[1] + 1);
    EXPECT_GE(b[0].x + b[0].w, r[2] - 1);
    EXPECT_GE(b[0].y + b[0].h, r[3] - 1);
    expect_box_matches(b[0], r, 4.0);
    data::sample_rng().seed(s);
    EXPECT_TRUE(vt::same(op(row)[0], out[0]));
  }
  EXPECT_GT(kept, 20);
}

TEST(VisionBBox, RandomAffineDropsBoxesThatLeave) {
  // Big translations push a corner box out of the image: then it must be dropped with its label,
  // and what is left of it in the image must be small.
  const data::Row row = scene(64, 64, {{0, 0, 12, 12}, {26, 26, 12, 12}});
  const auto op = vision::RandomAffineWithBBox({.translate = 0.45, .scale = 0, .fill = 0});
  int dropped = 0;
  for (uint64_t s = 0; s < 40; ++s) {
    data::sample_rng().seed(s);
    const data::Row out = op(row);
    const std::vector<B> b = boxes_of(out[1]);
    ASSERT_EQ(out[2].numel(), int64_t(b.size()));
    EXPECT_TRUE(vt::same(out[3], row[3]));
    int64_t white = 0;
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x) white += at(out[0], y, x) > 127;
    double kept_area = 0, half_perimeter = 0;
    for (const B& bb : b) kept_area += bb.w * bb.h, half_perimeter += bb.w + bb.h;
    // Translation only (sub-pixel, so edges are interpolated): white pixels = kept area + dropped
    // remnants, up to half a pixel along each edge.
    EXPECT_GE(double(white), kept_area - half_perimeter - 2);
    if (b.size() < 2) {
      ++dropped;
      EXPECT_LT(double(white) - kept_area, 0.1 * 144 + 24);  // remnants are slivers
      EXPECT_EQ(vt::values<int32_t>(out[2]).size(), b.size());
    }
  }
  EXPECT_GT(dropped, 0);
}

TEST(VisionBBox, MosaicPlacesBoxes) {
  const int64_t s = 32;
  std::vector<data::Row> samples;
  for (int t = 0; t < 4; ++t) {
    data::Row r = scene(s, s, {{4.0 + t, 6, 10, 8}, {20, 18, 12, 14}}, 40 + t);
    r.pop_back();
    r[2] = from_vector<int32_t>({10 * t, 10 * t + 1}, {2});
    samples.push_back(r);
  }
  for (uint64_t seed = 0; seed < 10; ++seed) {
    data::sample_rng().seed(seed);
    const data::Row out = vision::mosaic(samples, s);
    ASSERT_EQ(out[0].shape(), (Shape{2 * s, 2 * s, 3}));
    const std::vector<B> b = boxes_of(out[1]);
    ASSERT_EQ(out[2].numel(), int64_t(b.size()));
    // Every box is white inside, and the white pixels are exactly the boxes (tiles are disjoint).
    double area = 0;
    for (const B& bb : b) {
      area += bb.w * bb.h;
      for (int64_t y = int64_t(bb.y); y < int64_t(bb.y + bb.h); ++y)
        for (int64_t x = int64_t(bb.x); x < int64_t(bb.x + bb.w); ++x)
          ASSERT_EQ(at(out[0], y, x), 255);
    }
    int64_t white = 0, x_c = 0, y_c = 0;
    for (int64_t y = 0; y < 2 * s; ++y)
      for (int64_t x = 0; x < 2 * s; ++x) {
        white += at(out[0], y, x) == 255;
        if (at(out[0], y, x) == 40) x_c = std::max(x_c, x + 1), y_c = std::max(y_c, y + 1);
      }
    EXPECT_EQ(double(white), area);
    // Tile t's background only appears in its quadrant around the center (x_c, y_c).
    for (int64_t y = 0; y < 2 * s; ++y)
      for (int64_t x = 0; x < 2 * s; ++x) {
        const double v = at(out[0], y, x);
        if (v == 41) EXPECT_TRUE(x >= x_c && y < y_c);
        if (v == 42) EXPECT_TRUE(x < x_c && y >= y_c);
        if (v == 43) EXPECT_TRUE(x >= x_c && y >= y_c);
      }
    // Labels travel with their boxes: a box's label tens digit is its tile.
    const std::vector<int32_t> lab = vt::values<int32_t>(out[2]);
    for (size_t i = 0; i < b.size(); ++i) {
      const int tile = lab[i] / 10;
      const bool right = b[i].x >= double(x_c), below = b[i].y >= double(y_c);
      EXPECT_EQ(tile, int(right) + 2 * int(below));
    }
  }
  // The flattened-row form gives the same result.
  data::Row flat;
  for (const auto& r : samples) flat.insert(flat.end(), r.begin(), r.end());
  data::sample_rng().seed(4);
  const data::Row a = vision::Mosaic(s)(flat);
  data::sample_rng().seed(4);
  const data::Row m = vision::mosaic(samples, s);
  EXPECT_TRUE(vt::same(a[0], m[0]));
  EXPECT_TRUE(vt::same(a[1], m[1]));
  EXPECT_NE(vt::error_of([&] {
              vision::Mosaic(s)({flat[0], flat[1], flat[2]});
            }).find("4 samples"),
            std::string::npos);
}
