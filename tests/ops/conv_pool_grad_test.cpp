// conv2d_backward_weight_pooled (backends/cpu/ops/conv_pool.cpp,
// backends/cpu/kernels/conv_pool_grad.cpp) against the unfused pair it replaces,
// conv2d_backward_weight(max_pool2d_backward(dy, idx), x), run through ops::call on the existing
// ops, with the indices from the real max_pool2d of a random conv output; and against float64 loops
// over the argmax positions written here. Geometries: LeNet's conv1 (batch 64), C_in 3 3x3 pad 1,
// an overlapping 3x3 stride-2 pool (a position can win twice), a stride-2 conv, dilation with a
// stride-2 column, and C_in 5 7x7 (more accumulators than the register file: several groups). Then
// repeatability, thread counts and the error messages.
//
// Tolerance: the fused op and the unfused pair add the same products in different orders, so a
// result is compared as |got - want| <= 1e-5 * S + 1e-30, where S = sum over the contributing
// products of |g * x| (the float64 bound of the rounding either order can collect).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"
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
  int64_t N, C, H, W, O, kh, kw;
  int64_t sh, sw, pt, pb, pl, pr, dh, dw;  // conv
  int64_t pk, ps, pp;                      // square pool: kernel, stride, padding (all sides)
  bool ceil = false;
  int64_t OH() const { return (H + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int64_t OW() const { return (W + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
  Shape y_shape() const { return {N, O, OH(), OW()}; }
  Shape w_shape() const { return {O, C, kh, kw}; }
};

const Geo kGeos[] = {
    {"lenet_conv1", 64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 0},
    {"c3_3x3_pad1", 4, 3, 17, 19, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 0},
    {"overlap_pool_3x3_s2", 3, 2, 15, 15, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 2, 1, true},
    {"conv_stride2", 3, 3, 23, 21, 7, 5, 5, 2, 2, 2, 1, 2, 2, 1, 1, 2, 2, 0},
    {"dilated_stride_w2", 2, 1, 15, 21, 3, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0},
    {"c5_7x7_groups", 2, 5, 20, 22, 4, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 2, 2, 0},
    {"wide_2x19_dilated_rows", 2, 2, 9, 40, 3, 2, 19, 1, 1, 0, 1, 4, 4, 3, 1, 2, 2,
     0},  // 3 vectors of 8 / 5 of 4 per row
};

Attrs conv_attrs(const Geo& g) {
  Attrs a;
  a.set("stride", std::vector<int64_t>{g.sh, g.sw})
      .set("padding", std::vector<int64_t>{g.pt, g.pb, g.pl, g.pr})
      .set("dilation", std::vector<int64_t>{g.dh, g.dw})
      .set("groups", int64_t(1))
      .set("weight_shape", g.w_shape());
  return a;
}
Attrs pooled_attrs(const Geo& g) {
  return Attrs(conv_attrs(g)).set("conv_output_shape", g.y_shape());
}
Attrs pool_attrs(const Geo& g) {
  Attrs a;
  a.set("kernel_size", std::vector<int64_t>{g.pk, g.pk})
      .set("stride", std::vector<int64_t>{g.ps, g.ps})
      .set("padding", std::vector<int64_t>{g.pp, g.pp, g.pp, g.pp})
      .set("ceil_mode", g.ceil);
  return a;
}

std::vector<float> rnd(size_t n, uint32_t seed) { return lcg_values(n, seed); }
Tensor rnd_tensor(const Shape& s, uint32_t seed) {
  return from_vector(rnd(size_t(shape_numel(s)), seed), s);
}

// Float64 dw and S (sum of |terms|) straight from the definition over the argmax positions.
void ref_dw(const Geo& g, const std::vector<float>& dy, const std::vector<int64_t>& idx,
            const std::vector<float>& x, std::vector<double>& dw, std::vector<double>& mag) {
  const int64_t OW = g.OW(), PP = int64_t(dy.size()) / (g.N * g.O);
  dw.assign(size_t(g.O * g.C * g.kh * g.kw), 0.0);
  mag = dw;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t e = 0; e < PP; ++e) {
        const size_t at = size_t((n * g.O + o) * PP + e);
        const int64_t oh = idx[at] / OW, ow = idx[at] % OW;
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.sh - g.pt + i * g.dh, iw = ow * g.sw - g.pl + j * g.dw;
              if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
              const double t =
                  double(dy[at]) * double(x[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)]);
              const size_t k = size_t(((o * g.C + c) * g.kh + i) * g.kw + j);
              dw[k] += t;
              mag[k] += std::abs(t);
            }
      }
}

void expect_within(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& mag, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t k = 0; k < got.size() && bad < 5; ++k)
    if (!(std::abs(double(got[k]) - want[k]) <= 1e-5 * mag[k] + 1e-30)) {
      ++bad;
      ADD_FAILURE() << what << " [" << k << "]: got " << got[k] << ", want " << want[k]
                    << " (S=" << mag[k] << ")";
    }
}

TEST(ConvPoolGrad, MatchesUnfusedPairAndFloat64) {
  for (const Geo& g : kGeos) {
    const Tensor x = rnd_tensor({g.N, g.C, g.H, g.W}, 1), y = rnd_tensor(g.y_shape(), 2);
    const Tensors pooled = ops::call(OpId::MaxPool2d, {y}, pool_attrs(g));  // (y_pooled, indices)
    const Tensor& idx = pooled[1];
    const Tensor dy = rnd_tensor(idx.shape(), 3);
    const Tensor dconv = ops::call1(OpId::MaxPool2dBackward, {dy, idx},
                                    Attrs(pool_attrs(g)).set("input_shape", g.y_shape()));
    const Tensor unfused = ops::call1(OpId::Conv2dBackwardWeight, {dconv, x}, conv_attrs(g));
    const Tensor fused =
        ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {dy, idx, x}, pooled_attrs(g));
    EXPECT_EQ(fused.shape(), g.w_shape()) << g.name;
    std::vector<double> want, mag;
    ref_dw(g, dy.to_vector<float>(), idx.to_vector<int64_t>(), x.to_vector<float>(), want, mag);
    expect_within(fused.to_vector<float>(), want, mag, std::string(g.name) + " fused vs float64");
    expect_within(unfused.to_vector<float>(), want, mag,
                  std::string(g.name) + " unfused vs float64");
    // Fused vs unfused directly (both float32): within 2e-5 * S (each is within 1e-5 * S of
    // float64).
    const auto f = fused.to_vector<float>(), u = unfused.to_vector<float>();
    for (size_t k = 0; k < f.size(); ++k)
      ASSERT_LE(std::abs(double(f[k]) - double(u[k])), 2e-5 * mag[k] + 1e-30)
          << g.name << " [" << k << "]";
    // The gradient is not trivially zero (catches an all-zero kernel passing a loose check).
    double norm = 0;
    for (double v : want) norm += std::abs(v);
    EXPECT_GT(norm, 1.0) << g.name;
  }
}

// Every Highway target this build has and the CPU runs (lane counts 4 / 8, register budgets 12 /
// 28 accumulators: other groupings and unroll factors), each geometry against float64.
TEST(ConvPoolGrad, EveryTarget) {
  const auto targets = cpu::direct_conv_targets();
  ASSERT_FALSE(targets.empty());
  std::string names;
  for (const std::string& t : targets) names += t + " ";
  RecordProperty("targets", names);  // in --gtest_output=xml
  for (const std::string& t : targets) {
    cpu::direct_conv_use_target(t);
    for (const Geo& g : kGeos) {
      const Tensor x = rnd_tensor({g.N, g.C, g.H, g.W}, 7), y = rnd_tensor(g.y_shape(), 8);
      const Tensor idx = ops::call(OpId::MaxPool2d, {y}, pool_attrs(g))[1];
      const Tensor dy = rnd_tensor(idx.shape(), 9);
      std::vector<double> want, mag;
      ref_dw(g, dy.to_vector<float>(), idx.to_vector<int64_t>(), x.to_vector<float>(), want, mag);
      expect_within(ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {dy, idx, x}, pooled_attrs(g))
                        .to_vector<float>(),
                    want, mag, t + " " + g.name);
    }
  }
  cpu::direct_conv_use_target("");
}

// Same inputs, same thread count: bit-equal results; other thread counts stay within tolerance.
TEST(ConvPoolGrad, RepeatableAndThreadCounts) {
  const Geo& g = kGeos[0];
  const Tensor x = rnd_tensor({g.N, g.C, g.H, g.W}, 4), y = rnd_tensor(g.y_shape(), 5);
  const Tensor idx = ops::call(OpId::MaxPool2d, {y}, pool_attrs(g))[1];
  const Tensor dy = rnd_tensor(idx.shape(), 6);
  std::vector<double> want, mag;
  ref_dw(g, dy.to_vector<float>(), idx.to_vector<int64_t>(), x.to_vector<float>(), want, mag);
  const int old = get_num_threads();
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    const auto a = ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {dy, idx, x}, pooled_attrs(g))
                       .to_vector<float>();
    const auto b = ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {dy, idx, x}, pooled_attrs(g))
                       .to_vector<float>();
    EXPECT_EQ(a, b) << "threads " << t;
    expect_within(a, want, mag, "threads " + std::to_string(t));
  }
  set_num_threads(old);
}

// A hand-computed case: one image, one channel, 1x1 pool (every position is its own argmax).
// dw[0,0,i,j] = sum over positions of dy * x shifted, 2x2 kernel on a 2x3 input, no padding.
TEST(ConvPoolGrad, HandComputed) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {1, 1, 2, 3});
  const Tensor dy = from_vector(std::vector<float>{1, 10}, {1, 1, 1, 2});
  const Tensor idx = from_vector(std::vector<int64_t>{0, 1}, {1, 1, 1, 2});
  Attrs a;
  a.set("stride", std::vector<int64_t>{1, 1}).set("padding", std::vector<int64_t>{0, 0, 0, 0});
  a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  a.set("weight_shape", Shape{1, 1, 2, 2}).set("conv_output_shape", Shape{1, 1, 1, 2});
  // tap (i, j): 1 * x[i][j] + 10 * x[i][j + 1]
  EXPECT_EQ(ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {dy, idx, x}, a).to_vector<float>(),
            (std::vector<float>{1 + 20, 2 + 30, 4 + 50, 5 + 60}));
  // Both pooled elements pointing at position 1 simply add: 11 * x[i][j + 1].
  const Tensor idx2 = from_vector(std::vector<int64_t>{1, 1}, {1, 1, 1, 2});
  EXPECT_EQ(ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {dy, idx2, x}, a).to_vector<float>(),
            (std::vector<float>{22, 33, 55, 66}));
}

TEST(ConvPoolGrad, Errors) {
  const Geo& g = kGeos[1];  // x (4, 3, 17, 19), w (8, 3, 3, 3), conv output (4, 8, 17, 19), pooled
                            // (4, 8, 8, 9)
  const Tensor x = zeros({4, 3, 17, 19}), dy = zeros({4, 8, 8, 9}),
               idx = zeros({4, 8, 8, 9}, kInt64);
  const Attrs a = pooled_attrs(g);
  auto run = [&](Tensors in, Attrs at) {
    return error_of([&] { ops::call1(cpu::op::Conv2dBackwardWeightPooled(), in, at); });
  };
  std::string m = run({dy, zeros({4, 8, 8, 9}, kInt32), x}, a);
  EXPECT_NE(m.find("indices must be int64 (max_pool2d's second output), got int32"),
            std::string::npos)
      << m;
  m = run({dy, zeros({4, 8, 8, 8}, kInt64), x}, a);
  EXPECT_NE(m.find("indices must have dy_pooled's shape (4, 8, 8, 9), got (4, 8, 8, 8)"),
            std::string::npos)
      << m;
  m = run({zeros({4, 8, 8, 9}, kFloat64), idx, x}, a);
  EXPECT_NE(m.find("supports float32 only, got dy_pooled of float64"), std::string::npos) << m;
  m = run({dy, idx, zeros({4, 3, 17, 19}, kFloat64)}, a);
  EXPECT_NE(m.find("supports float32 only, got x of float64"), std::string::npos) << m;
  m = run({dy, idx, x}, Attrs(a).set("conv_output_shape", Shape{4, 8, 16, 19}));
  EXPECT_NE(m.find("conv_output_shape (4, 8, 16, 19) is not the output (4, 8, 17, 19) of conv2d of "
                   "x (4, 3, 17, 19) and "
                   "weight_shape (8, 3, 3, 3)"),
            std::string::npos)
      << m;
  m = run({dy, idx, x}, Attrs(a).set("weight_shape", Shape{8, 2, 3, 3}));
  EXPECT_NE(m.find("input has C=3 channels but weight (8, 2, 3, 3) expects C/groups=2"),
            std::string::npos)
      << m;
  m = run({dy, idx, x}, Attrs(a).set("blocked_x", true));
  EXPECT_NE(m.find("plain NCHW tensors only"), std::string::npos) << m;
  m = run({dy, idx, x}, conv_attrs(g));
  EXPECT_NE(m.find("missing attribute 'conv_output_shape'"), std::string::npos) << m;
  m = run({dy, idx, x}, Attrs(a).set("groups", int64_t(3)));
  EXPECT_NE(m.find("groups=1 only, got groups=3"), std::string::npos) << m;
  m = run({zeros({4, 7, 8, 9}), zeros({4, 7, 8, 9}, kInt64), x}, a);
  EXPECT_NE(
      m.find("dy_pooled (4, 7, 8, 9) is no max_pool2d output of the conv output (4, 8, 17, 19)"),
      std::string::npos)
      << m;
  // An index outside the 17 x 19 plane: the kernel refuses it (the unfused scatter would write out
  // of bounds).
  std::vector<int64_t> bad(size_t(idx.numel()), 0);
  bad[5] = 17 * 19;
  m = run({dy, from_vector(bad, idx.shape()), x}, a);
  EXPECT_NE(m.find("an index lies outside the conv output plane of 17 x 19 = 323 positions"),
            std::string::npos)
      << m;
}

// ---- op-table row (registry_test: every primitive has one) -----------------------------------
// Inputs: the conv output y (its max pool gives the indices), the pooled gradient, x.
const Geo kRowGeo{"row", 2, 2, 9, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 0};

SPORE_OP_CASES({
    OpCase{.name = "conv2d_backward_weight_pooled/c2_3x3_pool2",
           .op = cpu::op::Conv2dBackwardWeightPooled(),
           .inputs = {{.shape = kRowGeo.y_shape(), .differentiable = false},
                      {.shape = {2, 3, 4, 4}},
                      {.shape = {2, 2, 9, 8}}},
           .run = [](const Tensors& t) -> Tensors {
             const Tensor idx = ops::call(OpId::MaxPool2d, {t[0]}, pool_attrs(kRowGeo))[1];
             return {ops::call1(cpu::op::Conv2dBackwardWeightPooled(), {t[1], idx, t[2]},
                                pooled_attrs(kRowGeo))};
           },
           .reference = [](const Tensors& t) -> Tensors {
             // Argmax of each 2x2 window in float64 (random values: no ties), then the definition.
             const std::vector<double> y = values(t[0]);
             const int64_t OH = kRowGeo.OH(), OW = kRowGeo.OW();
             std::vector<int64_t> idx;
             for (int64_t q = 0; q < 2 * 3; ++q)
               for (int64_t ph = 0; ph < 4; ++ph)
                 for (int64_t pw = 0; pw < 4; ++pw) {
                   int64_t best = (2 * ph) * OW + 2 * pw;
                   for (int64_t a = 0; a < 2; ++a)
                     for (int64_t b = 0; b < 2; ++b) {
                       const int64_t p = (2 * ph + a) * OW + 2 * pw + b;
                       if (y[size_t(q * OH * OW + p)] > y[size_t(q * OH * OW + best)]) best = p;
                     }
                   idx.push_back(best);
                 }
             std::vector<float> dy, x;
             for (double v : values(t[1])) dy.push_back(float(v));
             for (double v : values(t[2])) x.push_back(float(v));
             std::vector<double> dw, mag;
             ref_dw(kRowGeo, dy, idx, x, dw, mag);
             return {from_values(dw, kRowGeo.w_shape(), kFloat64)};
           },
           .dtypes = {kFloat32}},
});

}  // namespace
}  // namespace spore::test
