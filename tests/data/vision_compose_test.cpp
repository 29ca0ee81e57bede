// Generic transforms and batch mixers: TypeCast, OneHot (with smoothing), Compose, RandomApply,
// RandomChoice, Beta sampling, MixUp and CutMix (labels mixed by exactly the pixels mixed).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/data/vision_util.h"

using namespace spore;
using vt::at;

TEST(VisionCompose, TypeCastAndOneHot) {
  const Tensor img = vt::index_image(2, 2, 1);
  const Tensor f = vision::TypeCast(kFloat32)(img);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(vt::values<float>(f), (std::vector<float>{0, 1, 2, 3}));
  const Tensor oh = vision::OneHot(4)(from_vector<int32_t>({2, 0}, {2}));
  ASSERT_EQ(oh.shape(), (Shape{2, 4}));
  EXPECT_EQ(vt::values<float>(oh), (std::vector<float>{0, 0, 1, 0, 1, 0, 0, 0}));
  const Tensor sm = vision::OneHot(4, 0.2)(scalar_tensor(3, kInt64));
  ASSERT_EQ(sm.shape(), (Shape{4}));
  EXPECT_FLOAT_EQ(vt::values<float>(sm)[3], 0.85f);
  EXPECT_FLOAT_EQ(vt::values<float>(sm)[0], 0.05f);
  EXPECT_NE(vt::error_of([] {
              vision::OneHot(3)(from_vector<int32_t>({3}, {1}));
            }).find("outside [0, 3)"),
            std::string::npos);
  EXPECT_NE(vt::error_of([] { vision::OneHot(3)(scalar_tensor(1.5)); }).find("integer"),
            std::string::npos);
}

TEST(VisionCompose, ComposeApplyChoice) {
  const Tensor img = vt::index_image(3, 4, 1);
  const auto hv = vision::Compose({vision::HorizontalFlip(), vision::VerticalFlip()});
  EXPECT_TRUE(vt::same(hv(img), vision::Rotate(180)(img)));
  EXPECT_TRUE(vt::same(vision::RandomApply({vision::HorizontalFlip()}, 1.0)(img),
                       vision::HorizontalFlip()(img)));
  EXPECT_TRUE(vt::same(vision::RandomApply({vision::HorizontalFlip()}, 0.0)(img), img));
  const auto choice = vision::RandomChoice({vision::HorizontalFlip(), vision::VerticalFlip()});
  int h = 0, v = 0;
  for (uint64_t s = 0; s < 100; ++s) {
    const Tensor out = vt::seeded(choice, img, s);
    EXPECT_TRUE(vt::same(out, vt::seeded(choice, img, s)));
    h += vt::same(out, vision::HorizontalFlip()(img));
    v += vt::same(out, vision::VerticalFlip()(img));
  }
  EXPECT_EQ(h + v, 100);
  EXPECT_GT(h, 25);
  EXPECT_GT(v, 25);
}

TEST(VisionCompose, BetaSampleMean) {
  data::sample_rng().seed(42);
  for (double a : {0.4, 1.0, 3.0}) {
    double sum = 0;
    const int n = 4000;
    for (int i = 0; i < n; ++i) {
      const double x = vision::sample_beta(a, a);
      ASSERT_GE(x, 0);
      ASSERT_LE(x, 1);
      sum += x;
    }
    EXPECT_NEAR(sum / n, 0.5, 0.03) << a;
  }
  data::sample_rng().seed(1);
  double m = 0;
  for (int i = 0; i < 4000; ++i) m += vision::sample_beta(2, 6);
  EXPECT_NEAR(m / 4000, 0.25, 0.02);
}

namespace {
// A batch of n constant images (image i is all i * 10) and one-hot labels of class i.
data::Row batch(int64_t n, int64_t h, int64_t w, int64_t c) {
  Tensor img = Tensor::empty({n, h, w, c}, kUInt8);
  for (int64_t i = 0; i < n * h * w * c; ++i)
    img.data<uint8_t>()[i] = uint8_t((i / (h * w * c)) * 10);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t(i));
  return {img, vision::OneHot(n)(from_vector<int32_t>(ids, {n})), from_vector<int32_t>(ids, {n})};
}
}  // namespace

TEST(VisionCompose, MixUpMixesImagesAndLabelsAlike) {
  const data::Row row = batch(6, 4, 4, 3);
  data::sample_rng().seed(3);
  const data::Row out = vision::MixUp(1.0)(row);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].dtype(), kFloat32);
  const std::vector<float> img = vt::values<float>(out[0]), lab = vt::values<float>(out[1]);
  for (int64_t i = 0; i < 6; ++i) {
    float sum = 0, expect = 0;
    for (int64_t k = 0; k < 6; ++k)
      sum += lab[size_t(i * 6 + k)], expect += lab[size_t(i * 6 + k)] * float(k * 10);
    EXPECT_NEAR(sum, 1, 1e-5);
    // The image value is the label-weighted mix of the source values.
    EXPECT_NEAR(img[size_t(i * 48 + 5)], expect, 1e-3);
  }
  EXPECT_TRUE(vt::same(out[2], row[2]));  // other columns pass through
  data::sample_rng().seed(3);
  EXPECT_TRUE(vt::same(vision::MixUp(1.0)(row)[0], out[0]));
}

TEST(VisionCompose, CutMixLabelsMatchPastedArea) {
  for (auto fmt : {vision::ImageBatchFormat::NHWC, vision::ImageBatchFormat::NCHW}) {
    const data::Row row = batch(5, 8, 8, 3);  // constant images: NCHW reading is the same data
    data::sample_rng().seed(9);
    const data::Row out = vision::CutMix(1.0, 1.0, fmt)(row);
    const std::vector<float> img = vt::values<float>(out[0]), lab = vt::values<float>(out[1]);
    const int64_t per = 8 * 8 * 3;
    for (int64_t i = 0; i < 5; ++i) {
      // Fraction of pixels that are not image i's own value equals 1 - lab[i][i] (unless the
      // partner is itself).
      int64_t foreign = 0;
      for (int64_t p = 0; p < per; ++p) foreign += img[size_t(i * per + p)] != float(i * 10);
      const float own = lab[size_t(i * 5 + i)];
      if (own < 1) EXPECT_NEAR(double(foreign) / double(per), 1 - own, 1e-5) << i;
      float sum = 0;
      for (int64_t k = 0; k < 5; ++k) sum += lab[size_t(i * 5 + k)];
      EXPECT_NEAR(sum, 1, 1e-5);
    }
  }
  const data::Row row = batch(4, 8, 8, 3);
  EXPECT_TRUE(vt::same(vision::CutMix(1.0, 0.0)(row)[0], vision::TypeCast(kFloat32)(row[0])));
  EXPECT_NE(vt::error_of([&] {
              vision::CutMix()({row[0], row[2]});
            }).find("one-hot"),
            std::string::npos);
}
