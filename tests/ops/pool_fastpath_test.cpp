// max_pool2d's 2x2 stride-2 fast path against a plain loop on awkward values: NaN (the first one
// wins, as the general kernel and PyTorch), +-inf, ties (the first maximum in row-major order
// keeps its index) and odd sizes (the last row / column is dropped).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "spore/spore.h"

namespace spore {
namespace {

TEST(MaxPoolFastPath, MatchesPlainLoopOnNanInfAndTies) {
  const int64_t N = 2, C = 3, H = 7, W = 9, OH = 3, OW = 4;
  set_seed(3);
  std::vector<float> v = randn({N, C, H, W}).to_vector<float>();
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < v.size(); i += 7) v[i] = std::nanf("");
  for (size_t i = 3; i < v.size(); i += 13) v[i] = inf;
  for (size_t i = 5; i < v.size(); i += 17) v[i] = -inf;
  for (size_t i = 1; i < v.size(); i += 5) v[i] = v[i + 1] = 0.5f;
  auto [y, idx] =
      max_pool2d_with_indices(from_vector(v, {N, C, H, W}), Pool2dOptions{.kernel_size = {2, 2}});
  ASSERT_EQ(y.shape(), (Shape{N, C, OH, OW}));
  const std::vector<float> yv = y.to_vector<float>();
  const std::vector<int64_t> iv = idx.to_vector<int64_t>();
  for (int64_t q = 0; q < N * C; ++q)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float best = -inf;
        int64_t bi = 2 * oh * W + 2 * ow;
        for (int64_t h = 2 * oh; h < 2 * oh + 2 && !std::isnan(best); ++h)
          for (int64_t w = 2 * ow; w < 2 * ow + 2; ++w) {
            const float e = v[size_t(q * H * W + h * W + w)];
            if (std::isnan(e) || e > best) {
              best = e;
              bi = h * W + w;
              if (std::isnan(e)) break;
            }
          }
        const size_t o = size_t((q * OH + oh) * OW + ow);
        EXPECT_EQ(iv[o], bi) << "plane " << q << " window (" << oh << ", " << ow << ")";
        if (std::isnan(best))
          EXPECT_TRUE(std::isnan(yv[o]));
        else
          EXPECT_EQ(yv[o], best);
      }
}

}  // namespace
}  // namespace spore
