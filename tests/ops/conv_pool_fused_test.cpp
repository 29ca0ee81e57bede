// conv2d_pool_fused (backends/cpu/ops/conv_pool.cpp, backends/cpu/kernels/conv_pool_fused.cpp)
// against the unfused public ops max_pool2d_with_indices(relu(conv2d(x, w, b))) with the direct
// conv forced (so the conv arithmetic is the same and the indices must match exactly, ties and NaNs
// included): LeNet's conv1 with and without bias / relu, C_in = 3, a 27x27 conv plane whose last
// row / column the 2x2 pool drops, ceil_mode, an overlapping padded 3x3/2 pool, a strided conv,
// every Highway target, the unfused fallback (C_in > 4), and the shape / dtype errors. Plus an op
// table row against float64 plain loops (registry_test wants one per primitive).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"
#include "op_table.h"
#include "ops/op.h"
#include "spore/spore.h"
#include "test_util.h"

namespace spore::test {
namespace {

using ops::Attrs;
using ops::OpId;

struct Geo {
  const char* name;
  Shape x, w;                        // (N, C, H, W), (O, C, kh, kw)
  std::vector<int64_t> stride, pad;  // conv: stride (2), padding (4)
  std::vector<int64_t> pk, ps, pp;   // pool: kernel_size, stride, padding (4)
  bool ceil = false;
};

// Deterministic values in [lo, hi).
Tensor filled(const Shape& s, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return from_vector(lcg_values(size_t(shape_numel(s)), seed, lo, hi), s);
}

Attrs fused_attrs(const Geo& g, bool bias, bool relu) {
  Attrs a;
  a.set("stride", g.stride).set("padding", g.pad).set("dilation", std::vector<int64_t>{1, 1});
  a.set("groups", int64_t(1)).set("has_bias", bias);
  if (relu) a.set("act", "relu");
  a.set("pool_kernel_size", g.pk).set("pool_stride", g.ps).set("pool_padding", g.pp);
  a.set("pool_ceil_mode", g.ceil);
  return a;
}

std::pair<Tensor, Tensor> fused(const Geo& g, const Tensor& x, const Tensor& w, const Tensor& b,
                                bool bias, bool relu) {
  ops::Tensors in{x, w};
  if (bias) in.push_back(b);
  auto r = ops::call(cpu::op::Conv2dPoolFused(), in, fused_attrs(g, bias, relu));
  return {r[0], r[1]};
}

std::pair<Tensor, Tensor> unfused(const Geo& g, const Tensor& x, const Tensor& w, const Tensor& b,
                                  bool bias, bool relu) {
  const Conv2dOptions co{.stride = g.stride, .padding = g.pad};
  Tensor c = bias ? conv2d(x, w, b, co) : conv2d(x, w, co);
  if (relu) c = spore::relu(c);
  return max_pool2d_with_indices(
      c, Pool2dOptions{.kernel_size = g.pk, .stride = g.ps, .padding = g.pp, .ceil_mode = g.ceil});
}

// The contract's definition: conv2d_fused (its relu is the conv kernel's, which maps NaN to 0 where
// the relu op keeps it), then max_pool2d.
std::pair<Tensor, Tensor> unfused_conv2d_fused(const Geo& g, const Tensor& x, const Tensor& w,
                                               const Tensor& b, bool bias, bool relu) {
  ops::Tensors in{x, w};
  if (bias) in.push_back(b);
  Tensor c = ops::call1(cpu::op::Conv2dFused(), in, fused_attrs(g, bias, relu));
  return max_pool2d_with_indices(
      c, Pool2dOptions{.kernel_size = g.pk, .stride = g.ps, .padding = g.pp, .ceil_mode = g.ceil});
}

using ModeGuard = cpu::ScopedConvImpl;

// y within 1e-5 relative (of the element, or of the largest |want| near zero), indices exact.
void expect_same(const std::pair<Tensor, Tensor>& got, const std::pair<Tensor, Tensor>& want,
                 const std::string& what) {
  ASSERT_EQ(got.first.shape(), want.first.shape()) << what;
  ASSERT_EQ(got.second.shape(), want.second.shape()) << what;
  ASSERT_EQ(got.first.dtype(), kFloat32) << what;
  ASSERT_EQ(got.second.dtype(), kInt64) << what;
  const auto gy = got.first.to_vector<float>(), wy = want.first.to_vector<float>();
  const auto gi = got.second.to_vector<int64_t>(), wi = want.second.to_vector<int64_t>();
  double scale = 0;
  for (float v : wy)
    if (std::isfinite(v)) scale = std::max(scale, double(std::fabs(v)));
  int bad = 0;
  for (size_t i = 0; i < gy.size() && bad < 5; ++i) {
    const bool both_nan = std::isnan(gy[i]) && std::isnan(wy[i]);
    const double tol = 1e-5 * std::max(double(std::fabs(wy[i])), scale);
    if (!both_nan && gy[i] != wy[i] && !(std::fabs(double(gy[i]) - double(wy[i])) <= tol))
      ++bad, ADD_FAILURE() << what << ": y[" << i << "] is " << gy[i] << ", want " << wy[i];
    if (gi[i] != wi[i])
      ++bad, ADD_FAILURE() << what << ": indices[" << i << "] is " << gi[i] << ", want " << wi[i];
  }
}

const std::vector<int64_t> k2{2, 2}, s1{1, 1}, p0{0, 0, 0, 0};
const Geo kLenet{"lenet_conv1", {64, 1, 28, 28}, {6, 1, 5, 5}, s1, {2, 2, 2, 2}, k2, k2, p0};
const Geo kGeos[] = {
    kLenet,
    {"c3_pad1", {4, 3, 16, 16}, {10, 3, 3, 3}, s1, {1, 1, 1, 1}, k2, k2, p0},
    {"odd_27x27_drops_last", {3, 1, 31, 31}, {5, 1, 5, 5}, s1, p0, k2, k2, p0},
    {"odd_27x27_ceil_mode", {3, 1, 31, 31}, {5, 1, 5, 5}, s1, p0, k2, k2, p0, true},
    {"pool3_s2_pad1", {3, 2, 20, 20}, {7, 2, 3, 3}, s1, {1, 1, 1, 1}, {3, 3}, k2, {1, 1, 1, 1}},
    {"pool3_tiled_c4_width37", {2, 4, 11, 39}, {9, 4, 3, 3}, s1, p0, {3, 3}, {3, 3}, p0},
    {"conv_stride2_asym_pad", {2, 2, 23, 25}, {4, 2, 5, 3}, k2, {2, 1, 0, 1}, k2, k2, p0},
};

class ConvPoolFused : public ::testing::TestWithParam<Geo> {};

TEST_P(ConvPoolFused, MatchesUnfusedOps) {
  const Geo& g = GetParam();
  ModeGuard mg("direct_nchw,onednn,onednn_via_f32,reference");
  const Tensor x = filled(g.x, 1), w = filled(g.w, 2, -0.5f, 0.5f), b = filled({g.w[0]}, 3);
  for (bool bias : {false, true})
    for (bool relu : {false, true})
      expect_same(fused(g, x, w, b, bias, relu), unfused(g, x, w, b, bias, relu),
                  std::string(g.name) + (bias ? " +bias" : "") + (relu ? " +relu" : ""));
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvPoolFused, ::testing::ValuesIn(kGeos),
                         [](const auto& info) { return std::string(info.param.name); });

// Ties (relu zeros; all-equal windows from a zero weight), infinities and NaNs take max_pool2d's
// index rules.
TEST(ConvPoolFusedRules, TiesAndNaNsAsMaxPool) {
  ModeGuard mg("direct_nchw,onednn,onednn_via_f32,reference");
  for (const Geo& g : {kLenet, kGeos[4]}) {
    Tensor x = filled(g.x, 4), w = filled(g.w, 5, -0.5f, 0.5f), b = filled({g.w[0]}, 6);
    float* xp = x.data<float>();
    xp[3 * g.x[3] + 7] = std::numeric_limits<float>::quiet_NaN();  // image 0, channel 0
    xp[x.numel() - 5] = std::numeric_limits<float>::infinity();
    xp[x.numel() / 2] = -std::numeric_limits<float>::infinity();
    float* wp = w.data<float>();
    const int64_t taps = g.w[1] * g.w[2] * g.w[3];
    std::fill(wp, wp + taps, 0.0f);  // output channel 0: bias only (or NaN / inf * 0 = NaN)
    for (bool relu : {false, true})
      expect_same(fused(g, x, w, b, true, relu), unfused_conv2d_fused(g, x, w, b, true, relu),
                  std::string(g.name) + " ties/NaN" + (relu ? " +relu" : ""));
    // Without relu the public ops agree too (NaN windows included).
    expect_same(fused(g, x, w, b, true, false), unfused(g, x, w, b, true, false),
                std::string(g.name) + " ties/NaN vs conv2d");
  }
}

TEST(ConvPoolFusedRules, EveryHighwayTarget) {
  ModeGuard mg("direct_nchw,onednn,onednn_via_f32,reference");
  for (const std::string& target : cpu::direct_conv_targets()) {
    cpu::direct_conv_use_target(target);
    for (const Geo& g : {kLenet, kGeos[2], kGeos[4], kGeos[5]}) {
      const Tensor x = filled(g.x, 7), w = filled(g.w, 8, -0.5f, 0.5f), b = filled({g.w[0]}, 9);
      expect_same(fused(g, x, w, b, true, true), unfused(g, x, w, b, true, true),
                  std::string(g.name) + " on " + target);
    }
  }
  cpu::direct_conv_use_target("");
}

// C_in = 8 is no direct-kernel geometry: the kernel runs conv2d_fused's and max_pool2d's.
TEST(ConvPoolFusedRules, FallbackForOtherGeometries) {
  const Geo g{"c8_fallback", {2, 8, 12, 12}, {5, 8, 3, 3}, s1, {1, 1, 1, 1}, k2, k2, p0};
  const Tensor x = filled(g.x, 10), w = filled(g.w, 11, -0.5f, 0.5f), b = filled({g.w[0]}, 12);
  expect_same(fused(g, x, w, b, false, false), unfused(g, x, w, b, false, false), g.name);
  // With bias and relu as oneDNN post-ops the rounding may differ from conv2d + relu: values only.
  auto f = fused(g, x, w, b, true, true);
  auto u = unfused(g, x, w, b, true, true);
  const auto fy = f.first.to_vector<float>(), uy = u.first.to_vector<float>();
  ASSERT_EQ(fy.size(), uy.size());
  for (size_t i = 0; i < fy.size(); ++i) ASSERT_NEAR(fy[i], uy[i], 1e-5 * (1 + std::fabs(uy[i])));
}

TEST(ConvPoolFusedRules, BadInputsAreRefused) {
  const Geo& g = kLenet;
  const Tensor x = filled({2, 1, 28, 28}, 1), w = filled(g.w, 2), b = filled({6}, 3);
  auto call = [&](ops::Tensors in, Attrs a) {
    return ops::call(cpu::op::Conv2dPoolFused(), in, a);
  };
  auto expect_msg = [&](ops::Tensors in, Attrs a, const std::string& part) {
    try {
      call(in, a);
      ADD_FAILURE() << "expected an error containing '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_msg({x.to(kFloat64), w.to(kFloat64)}, fused_attrs(g, false, true), "float32");
  expect_msg({x, w}, fused_attrs(g, true, true), "expected 3 inputs");
  expect_msg({x, w, filled({5}, 4)}, fused_attrs(g, true, true), "bias must have shape");
  expect_msg({x, w, b}, fused_attrs(g, true, true).set("act", "sigmoid"), "act must be");
  expect_msg({x, w}, fused_attrs(g, false, false).set("groups", int64_t(2)), "groups=1");
  expect_msg({filled({2, 3, 28, 28}, 5), w}, fused_attrs(g, false, false), "channels");
  expect_msg({filled({1, 28, 28}, 5), w}, fused_attrs(g, false, false), "rank 4");
  Attrs big = fused_attrs(g, false, false);
  big.set("pool_kernel_size", std::vector<int64_t>{40, 40});
  expect_msg({x, w}, big, "pool kernel");
  // A good call's shapes: (2, 6, 14, 14) twice.
  auto r = call({x, w, b}, fused_attrs(g, true, true));
  EXPECT_EQ(r[0].shape(), (Shape{2, 6, 14, 14}));
  EXPECT_EQ(r[1].shape(), (Shape{2, 6, 14, 14}));
  EXPECT_EQ(r[1].dtype(), kInt64);
}

// ---- op table row: float64 plain loops ----------------------------------------------------------
OpCase table_case() {
  const Geo g{"table", {2, 2, 9, 9}, {3, 2, 3, 3}, s1, {1, 1, 1, 1}, {3, 3}, k2, {1, 1, 1, 1}};
  return OpCase{
      .name = "conv2d_pool_fused/c2_pool3_s2_pad1_bias_relu",
      .op = cpu::op::Conv2dPoolFused(),
      .inputs = {{.shape = g.x}, {.shape = g.w, .lo = -0.5, .hi = 0.5}, {.shape = {3}}},
      .run = [g](const Tensors& t) -> Tensors {
        return ops::call(cpu::op::Conv2dPoolFused(), t, fused_attrs(g, true, true));
      },
      .reference = [](const Tensors& t) -> Tensors {
        const auto x = values(t[0]), w = values(t[1]), b = values(t[2]);
        const int64_t N = 2, C = 2, H = 9, W = 9, O = 3, K = 3, OH = 9, OW = 9, PH = 5, PW = 5;
        std::vector<double> c(size_t(N * O * OH * OW)), y, idx;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t o = 0; o < O; ++o)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                double s = b[size_t(o)];
                for (int64_t ci = 0; ci < C; ++ci)
                  for (int64_t i = 0; i < K; ++i)
                    for (int64_t j = 0; j < K; ++j) {
                      const int64_t ih = oh - 1 + i, iw = ow - 1 + j;
                      if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                      s += x[size_t(((n * C + ci) * H + ih) * W + iw)] *
                           w[size_t(((o * C + ci) * K + i) * K + j)];
                    }
                c[size_t(((n * O + o) * OH + oh) * OW + ow)] = std::max(s, 0.0);
              }
        for (int64_t q = 0; q < N * O; ++q)
          for (int64_t ph = 0; ph < PH; ++ph)
            for (int64_t pw = 0; pw < PW; ++pw) {
              double best = -INFINITY;
              int64_t bi = -1;
              for (int64_t h = std::max<int64_t>(2 * ph - 1, 0);
                   h < std::min<int64_t>(2 * ph + 2, OH); ++h)
                for (int64_t ww = std::max<int64_t>(2 * pw - 1, 0);
                     ww < std::min<int64_t>(2 * pw + 2, OW); ++ww)
                  if (bi < 0 || c[size_t(q * OH * OW + h * OW + ww)] > best)
                    best = c[size_t(q * OH * OW + h * OW + ww)], bi = h * OW + ww;
              y.push_back(best);
              idx.push_back(double(bi));
            }
        return {from_values(y, {N, O, PH, PW}, kFloat64), from_values(idx, {N, O, PH, PW}, kInt64)};
      },
      .dtypes = {kFloat32}};
}
SPORE_OP_CASES({table_case()});

}  // namespace
}  // namespace spore::test
