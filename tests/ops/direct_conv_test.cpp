// The direct NCHW convolution kernels for few input channels (backends/cpu/kernels/conv_direct.h)
// against float64 plain loops written here: forward with bias and relu, and the weight gradient,
// on LeNet's first conv, ResNet's CIFAR stem and odd geometries (stride 2, asymmetric padding,
// dilation, C_in 2 and 4, widths that are not a multiple of the vector length, batch 1). Then the
// same through the ops (Conv2d, Conv2dFused, Conv2dBackwardWeight) with the direct path forced and
// in the timed automatic mode, so the dispatch in nn_conv.cpp is covered too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"
#include "ops/op.h"
#include "spore/spore.h"
#include "test_util.h"

namespace spore::test {
namespace {

using cpu::DirectConvGeom;
using ops::Attrs;
using ops::OpId;

struct Case {
  const char* name;
  int64_t N, C, H, W, O, kh, kw, sh, sw, pt, pb, pl, pr, dh, dw;
};
const Case kCases[] = {
    {"lenet_conv1", 64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1},
    {"resnet_cifar_stem", 32, 3, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"stride2_pad1", 3, 3, 17, 19, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"asym_pad_c2", 2, 2, 11, 13, 5, 3, 5, 1, 1, 0, 2, 3, 1, 1, 1},
    {"c4_width37_batch1", 1, 4, 9, 37, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"dilated_stride_w2", 2, 1, 15, 21, 3, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2},
    {"k7_s2_c3", 2, 3, 23, 23, 17, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1},  // taps 147: several groups
    {"one_by_one_width1", 3, 2, 5, 1, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
};

DirectConvGeom geom_of(const Case& c) {
  const int64_t OH = (c.H + c.pt + c.pb - c.dh * (c.kh - 1) - 1) / c.sh + 1;
  const int64_t OW = (c.W + c.pl + c.pr - c.dw * (c.kw - 1) - 1) / c.sw + 1;
  return {c.N, c.C, c.H, c.W, c.O, c.kh, c.kw, OH, OW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw};
}

std::vector<float> values(size_t n, uint32_t seed) { return lcg_values(n, seed); }

// Float64 references, straight from the definition (out-of-range input positions are zero).
std::vector<double> ref_forward(const DirectConvGeom& g, const std::vector<float>& x,
                                const std::vector<float>& w, const std::vector<float>& b,
                                bool relu) {
  std::vector<double> y(size_t(g.N * g.O * g.OH * g.OW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double s = b.empty() ? 0.0 : b[size_t(o)];
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t ih = oh * g.sh - g.pt + i * g.dh, iw = ow * g.sw - g.pl + j * g.dw;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                s += double(x[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)]) *
                     double(w[size_t(((o * g.C + c) * g.kh + i) * g.kw + j)]);
              }
          y[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)] = relu ? std::max(s, 0.0) : s;
        }
  return y;
}

std::vector<double> ref_weight_grad(const DirectConvGeom& g, const std::vector<float>& dy,
                                    const std::vector<float>& x) {
  std::vector<double> dw(size_t(g.O * g.C * g.kh * g.kw), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            double s = 0;
            for (int64_t oh = 0; oh < g.OH; ++oh)
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t ih = oh * g.sh - g.pt + i * g.dh, iw = ow * g.sw - g.pl + j * g.dw;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                s += double(dy[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)]) *
                     double(x[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)]);
              }
            dw[size_t(((o * g.C + c) * g.kh + i) * g.kw + j)] += s;
          }
  return dw;
}

// got vs want to 1e-5 relative: of the element, or of the largest |want| for elements near zero
// (float32 sums of signed terms cancel). At most five failures are reported.
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 0.0) << what << ": reference is all zeros";
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double tol = 1e-5 * std::max(std::fabs(want[i]), scale);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol))
      ++bad, ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i];
  }
}

class DirectConv : public ::testing::TestWithParam<Case> {};

TEST_P(DirectConv, ForwardBiasReluMatchesFloat64) {
  const DirectConvGeom g = geom_of(GetParam());
  ASSERT_TRUE(cpu::direct_conv_supported(g));
  const auto x = values(size_t(g.N * g.C * g.H * g.W), 1),
             w = values(size_t(g.O * g.C * g.kh * g.kw), 2), b = values(size_t(g.O), 3);
  const size_t ny = size_t(g.N * g.O * g.OH * g.OW);
  for (bool relu : {false, true})
    for (bool bias : {false, true}) {
      std::vector<float> y(ny, 123.0f);  // every element must be overwritten
      cpu::conv2d_direct_forward(g, x.data(), w.data(), bias ? b.data() : nullptr, relu, y.data());
      expect_close(y, ref_forward(g, x, w, bias ? b : std::vector<float>{}, relu),
                   std::string(GetParam().name) + (bias ? " +bias" : "") + (relu ? " +relu" : ""));
    }
}

TEST_P(DirectConv, WeightGradMatchesFloat64) {
  const DirectConvGeom g = geom_of(GetParam());
  const auto x = values(size_t(g.N * g.C * g.H * g.W), 4),
             dy = values(size_t(g.N * g.O * g.OH * g.OW), 5);
  std::vector<float> dw(size_t(g.O * g.C * g.kh * g.kw), 123.0f);
  const auto want = ref_weight_grad(g, dy, x);
  for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the per-thread buffers
    cpu::conv2d_direct_backward_weight(g, dy.data(), x.data(), dw.data());
    expect_close(dw, want,
                 std::string(GetParam().name) + " weight grad, call " + std::to_string(rep));
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, DirectConv, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DirectConv, UnsupportedGeometriesAreRefused) {
  DirectConvGeom g = geom_of(kCases[0]);
  g.C = 5;  // more input channels: oneDNN's blocked kernels are the better fit
  EXPECT_FALSE(cpu::direct_conv_supported(g));
  g = geom_of(kCases[0]);
  g.kh = g.kw = 9, g.C = 4;  // 324 taps
  EXPECT_FALSE(cpu::direct_conv_supported(g));
}

// Every Highway target this CPU runs (AVX2 has 16 registers and other block sizes than AVX-512).
TEST(DirectConv, EveryHighwayTargetMatchesFloat64) {
  const auto targets = cpu::direct_conv_targets();
  ASSERT_FALSE(targets.empty());
  for (const std::string& target : targets) {
    cpu::direct_conv_use_target(target);
    for (const Case& c : {kCases[0], kCases[2], kCases[4], kCases[6]}) {
      const DirectConvGeom g = geom_of(c);
      const auto x = values(size_t(g.N * g.C * g.H * g.W), 10),
                 w = values(size_t(g.O * g.C * g.kh * g.kw), 11), b = values(size_t(g.O), 12),
                 dy = values(size_t(g.N * g.O * g.OH * g.OW), 13);
      const std::string what = std::string(c.name) + " on " + target;
      std::vector<float> y(size_t(g.N * g.O * g.OH * g.OW)), dw(w.size());
      cpu::conv2d_direct_forward(g, x.data(), w.data(), b.data(), true, y.data());
      expect_close(y, ref_forward(g, x, w, b, true), what + " forward");
      cpu::conv2d_direct_backward_weight(g, dy.data(), x.data(), dw.data());
      expect_close(dw, ref_weight_grad(g, dy, x), what + " weight grad");
    }
  }
  cpu::direct_conv_use_target("");
  EXPECT_THROW(cpu::direct_conv_use_target("NO_SUCH_TARGET"), Error);
}

// Through the ops: forced direct, then automatic (whichever wins the timing) against the same
// float64 reference, so both branches of nn_conv.cpp's dispatch give the right numbers.
Attrs conv_attrs(const Case& c) {
  Attrs a;
  a.set("stride", std::vector<int64_t>{c.sh, c.sw})
      .set("padding", std::vector<int64_t>{c.pt, c.pb, c.pl, c.pr});
  a.set("dilation", std::vector<int64_t>{c.dh, c.dw}).set("groups", int64_t(1));
  return a;
}

using ModeGuard = cpu::ScopedConvImpl;

TEST(DirectConv, OpsDispatchMatchesFloat64) {
  for (const Case& c : {kCases[0], kCases[1], kCases[3]}) {
    const DirectConvGeom g = geom_of(c);
    const auto xv = values(size_t(g.N * g.C * g.H * g.W), 6),
               wv = values(size_t(g.O * g.C * g.kh * g.kw), 7), bv = values(size_t(g.O), 8),
               dyv = values(size_t(g.N * g.O * g.OH * g.OW), 9);
    const Tensor x = from_vector(xv, {g.N, g.C, g.H, g.W}),
                 w = from_vector(wv, {g.O, g.C, g.kh, g.kw}), b = from_vector(bv, {g.O}),
                 dy = from_vector(dyv, {g.N, g.O, g.OH, g.OW});
    const Attrs a = conv_attrs(c);
    Attrs fused = a;
    fused.set("has_bias", true)
        .set("has_scale", false)
        .set("has_residual", false)
        .set("act", std::string("relu"));
    const Attrs wa = Attrs(a).set("weight_shape", std::vector<int64_t>{g.O, g.C, g.kh, g.kw});
    for (auto m : {"direct_nchw,onednn,onednn_via_f32,reference", "", "-direct_nchw"}) {
      ModeGuard guard(m);
      const std::string what = std::string(c.name) + " SPORE_CONV_IMPL=" + m;
      for (int rep = 0; rep < 2; ++rep) {  // auto: the timed first call, then the cached choice
        expect_close(ops::call1(OpId::Conv2d, {x, w, b}, a).to_vector<float>(),
                     ref_forward(g, xv, wv, bv, false), what + " conv2d");
        expect_close(ops::call1(cpu::op::Conv2dFused(), {x, w, b}, fused).to_vector<float>(),
                     ref_forward(g, xv, wv, bv, true), what + " conv2d_fused bias+relu");
        expect_close(ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, wa).to_vector<float>(),
                     ref_weight_grad(g, dyv, xv), what + " weight grad");
      }
    }
  }
}

}  // namespace
}  // namespace spore::test
