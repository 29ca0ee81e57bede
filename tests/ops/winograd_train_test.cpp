// Winograd for training (backends/cpu/kernels/conv_winograd.cpp, winograd_run): the convolution
// lists' winograd entry on weights that are not constants, for the forward conv, the data gradient
// and the weight gradient of 3x3 stride-1 convs between blocked activations. Each is forced
// (SPORE_CONV_IMPL's scope) and checked against a float64 loop written here, on the blocked
// layouts: odd output sizes (edge tiles with one row or column), paddings 0, 1, 2 and asymmetric
// ones, several channel blocks, tile counts that leave short register tiles, one and two threads.
//
// Tolerance, F(2x2, 3x3): |got - want| <= 1e-5 * max |want|. Its transforms are adds and halvings
// (exact in float32), so the error is float32 summation in another order (the input transform adds
// up to 4 inputs, the output transform 9 products' sums), measured at most ~3e-7 of max |want|
// here; the float32 direct conv (oneDNN) lands at ~1e-6. F(4x4, 3x3) (the forward and the data
// gradient where winograd_tile takes it: the f4_ geometries) has multiplies by 2 to 8 in its
// transforms and sixths in G: ~4e-6 measured, under the same bound. Each geometry runs on
// activations blocked
// in 16 lanes (nChw16c) and, where this machine's kernels take them (AVX2), 8 (nChw8c).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"  // the Highway target hooks
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/kernels/conv_winograd.h"
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
  int64_t N, C, H, W, O;
  int64_t pt, pb, pl, pr;
  int threads = 2;
  int64_t L = 16;  // the activations' channel block
  int64_t OH() const { return H + pt + pb - 2; }
  int64_t OW() const { return W + pl + pr - 2; }
};

// A blocked (N, C/L, H, W, L) tensor's element (n, c, h, w).
size_t at(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W, int64_t L) {
  return size_t((((n * (C / L) + c / L) * H + h) * W + w) * L + c % L);
}

// y = conv(x, w) in float64, blocked layouts in and out.
std::vector<double> forward_ref(const Geo& g, const std::vector<double>& x,
                                const std::vector<double>& w) {
  const int64_t OH = g.OH(), OW = g.OW();
  std::vector<double> y(size_t(g.N * g.O * OH * OW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                const int64_t ih = oh - g.pt + i, iw = ow - g.pl + j;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                acc += x[at(n, c, ih, iw, g.C, g.H, g.W, g.L)] *
                       w[size_t(((o * g.C + c) * 3 + i) * 3 + j)];
              }
          y[at(n, o, oh, ow, g.O, OH, OW, g.L)] = acc;
        }
  return y;
}

// dx = the gradient of sum(y * dy) with respect to x, in float64 (scattered through the window).
std::vector<double> backward_data_ref(const Geo& g, const std::vector<double>& dy,
                                      const std::vector<double>& w) {
  const int64_t OH = g.OH(), OW = g.OW();
  std::vector<double> dx(size_t(g.N * g.C * g.H * g.W), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double d = dy[at(n, o, oh, ow, g.O, OH, OW, g.L)];
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                const int64_t ih = oh - g.pt + i, iw = ow - g.pl + j;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                dx[at(n, c, ih, iw, g.C, g.H, g.W, g.L)] +=
                    d * w[size_t(((o * g.C + c) * 3 + i) * 3 + j)];
              }
        }
  return dx;
}

// dw = the gradient of sum(y * dy) with respect to w, in float64.
std::vector<double> backward_weight_ref(const Geo& g, const std::vector<double>& dy,
                                        const std::vector<double>& x) {
  const int64_t OH = g.OH(), OW = g.OW();
  std::vector<double> dw(size_t(g.O * g.C * 9), 0.0);
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double acc = 0;
          for (int64_t n = 0; n < g.N; ++n)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t ih = oh - g.pt + i, iw = ow - g.pl + j;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                acc += dy[at(n, o, oh, ow, g.O, OH, OW, g.L)] *
                       x[at(n, c, ih, iw, g.C, g.H, g.W, g.L)];
              }
          dw[size_t(((o * g.C + c) * 3 + i) * 3 + j)] = acc;
        }
  return dw;
}

Attrs conv_attrs(const Geo& g) {
  return Attrs()
      .set("stride", std::vector<int64_t>{1, 1})
      .set("padding", std::vector<int64_t>{g.pt, g.pb, g.pl, g.pr})
      .set("dilation", std::vector<int64_t>{1, 1})
      .set("groups", int64_t(1))
      .set("blocked_x", true)
      .set("blocked_y", true)
      .set("lanes", g.L);
}

// The worst |got - want| as a fraction of max |want|.
double rel_error(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = values(got);
  EXPECT_EQ(g.size(), want.size());
  double scale = 0, worst = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < g.size() && i < want.size(); ++i)
    worst = std::max(worst, std::fabs(g[i] - want[i]));
  return worst / scale;
}

constexpr double kTolF2x2 = 1e-5;  // F(2x2, 3x3), see the top of the file

struct Errors {
  double y, dx, dw;
};

// Runs the forward conv and both gradients through the forced winograd entry and returns their
// errors against the float64 loops.
Errors errors(const Geo& g) {
  const int old_threads = get_num_threads();
  set_num_threads(g.threads);
  set_seed(7);
  const Tensor x = randn({g.N, g.C / g.L, g.H, g.W, g.L});
  const Tensor w = randn({g.O, g.C, 3, 3}) * (1.0 / std::sqrt(9.0 * double(g.C)));
  const Tensor dy = randn({g.N, g.O / g.L, g.OH(), g.OW(), g.L});
  const Attrs a = conv_attrs(g);
  Tensor y, dx, dw;
  {
    cpu::ScopedConvImpl only("winograd");  // forced: an error if the entry declined
    y = ops::call1(OpId::Conv2d, {x, w}, a);
    dx = ops::call1(OpId::Conv2dBackwardData, {dy, w},
                    Attrs(a).set("input_shape", Shape{g.N, g.C, g.H, g.W}));
    dw = ops::call1(OpId::Conv2dBackwardWeight, {dy, x},
                    Attrs(a).set("weight_shape", Shape{g.O, g.C, 3, 3}));
  }
  set_num_threads(old_threads);
  return {rel_error(y, forward_ref(g, values(x), values(w))),
          rel_error(dx, backward_data_ref(g, values(dy), values(w))),
          rel_error(dw, backward_weight_ref(g, values(dy), values(x)))};
}

class WinogradTrain : public ::testing::TestWithParam<Geo> {};

TEST_P(WinogradTrain, ForwardAndGradientsMatchFloat64) {
  for (int64_t lanes : {16, 8}) {
    if (!cpu::winograd_takes_lanes(lanes)) continue;  // 8: AVX2 and narrower only
    Geo g = GetParam();
    g.L = lanes;
    const Errors e = errors(g);
    EXPECT_LE(e.y, kTolF2x2) << g.name << " forward, " << lanes << " lanes";
    EXPECT_LE(e.dx, kTolF2x2) << g.name << " backward data, " << lanes << " lanes";
    EXPECT_LE(e.dw, kTolF2x2) << g.name << " backward weight, " << lanes << " lanes";
    const long long m = cpu::winograd_tile(g.N, g.OH(), g.OW(), g.C, g.O);
    std::printf(
        "  %s, %lld lanes: F(%lldx%lld, 3x3) forward %.2e, backward data %.2e, backward weight "
        "%.2e of max |want|\n",
        g.name, (long long)lanes, m, m, e.y, e.dx, e.dw);
  }
}

const Geo kGeos[] = {
    {"resnet_like", 4, 32, 8, 8, 48, 1, 1, 1, 1},
    {"odd_sizes", 3, 16, 7, 9, 32, 1, 1, 1, 1},
    {"no_padding", 2, 16, 10, 11, 16, 0, 0, 0, 0},
    {"padding_2", 2, 16, 5, 6, 16, 2, 2, 2, 2},
    {"asymmetric_padding", 3, 32, 9, 8, 16, 0, 2, 2, 1},
    {"one_thread", 2, 48, 6, 6, 32, 1, 1, 1, 1, 1},
    {"few_tiles_split_channels", 4, 64, 4, 4, 64, 1, 1, 1, 1},
    // Enough 4x4 tiles for F(4x4, 3x3) (winograd_tile: 16 per thread): even, and edge tiles cut
    // after 3 rows and 1 column (15 x 13) with padding 2 on one side.
    {"f4_tiles", 4, 16, 16, 16, 32, 1, 1, 1, 1},
    {"f4_odd_sizes", 4, 32, 15, 13, 16, 1, 1, 2, 0},
};

INSTANTIATE_TEST_SUITE_P(Geometries, WinogradTrain, ::testing::ValuesIn(kGeos),
                         [](const ::testing::TestParamInfo<Geo>& i) {
                           return std::string(i.param.name);
                         });

// The same on every Highway target this build has and the CPU runs (AVX2 on an AVX-512 machine).
TEST(WinogradTrainTargets, EveryHighwayTarget) {
  for (const std::string& target : cpu::direct_conv_targets()) {
    cpu::direct_conv_use_target(target);
    for (Geo g : {kGeos[0], kGeos[1], kGeos[4], kGeos[8]})
      for (int64_t lanes : {16, 8}) {
        if (!cpu::winograd_takes_lanes(lanes)) continue;
        g.L = lanes;
        const Errors e = errors(g);
        EXPECT_LE(e.y, kTolF2x2) << g.name << " forward on " << target << ", " << lanes;
        EXPECT_LE(e.dx, kTolF2x2) << g.name << " backward data on " << target << ", " << lanes;
        EXPECT_LE(e.dw, kTolF2x2) << g.name << " backward weight on " << target << ", " << lanes;
      }
  }
  cpu::direct_conv_use_target("");
}

// conv2d_fused (bias, a folded BatchNorm's scale and shift, a residual, relu) on weights that are
// not constants: the scale folded into the transformed weights, the rest in the epilogue; against
// oneDNN's fused primitive (both float32: 1e-5 of the largest output).
void fused_matches_onednn(int64_t lanes) {
  Geo g{"fused", 2, 32, 9, 7, 32, 1, 1, 1, 1};
  g.L = lanes;
  set_seed(5);
  const Tensor x = randn({g.N, g.C / g.L, g.H, g.W, g.L});
  const Tensor w = randn({g.O, g.C, 3, 3}) * (1.0 / std::sqrt(9.0 * double(g.C)));
  const Tensor b = randn({g.O}) * 0.1, scale = rand({g.O}) + 0.5, shift = randn({g.O}) * 0.1;
  const Tensor r = randn({g.N, g.O / g.L, g.OH(), g.OW(), g.L});
  const Attrs a = Attrs(conv_attrs(g))
                      .set("has_bias", true)
                      .set("has_scale", true)
                      .set("has_residual", true)
                      .set("act", "relu");
  auto run = [&](const char* impl) {
    cpu::ScopedConvImpl only(impl);
    return ops::call1(cpu::op::Conv2dFused(), {x, w, b, scale, shift, r}, a);
  };
  const Tensor got = run("winograd"), want = run("onednn");
  EXPECT_LE(rel_error(got, values(want)), 1e-5) << lanes << " lanes";
}

TEST(WinogradTrainFused, MatchesOneDnn) {
  for (int64_t lanes : {16, 8})
    if (cpu::winograd_takes_lanes(lanes)) fused_matches_onednn(lanes);
}

// Which geometries the entry takes on weights that are not constants, and why not the others.
TEST(WinogradTrainList, TakesStrideOne3x3OnBlockedActivations) {
  cpu::ConvDesc d;
  d.dtype = kFloat32, d.N = 4, d.C = 64, d.H = d.W = d.OH = d.OW = 16, d.O = 64;
  d.kh = d.kw = 3, d.pt = d.pb = d.pl = d.pr = 1;
  d.blocked_x = d.blocked_y = true;
  auto why = [](const cpu::ConvDesc& e) {
    const cpu::ConvChoice c = cpu::choose_conv(e);
    for (const auto& [n, reason] : c.declined)
      if (n == "winograd") return reason;
    return std::string(c.name()) == "winograd" ? std::string() : std::string("(not listed)");
  };
  for (cpu::ConvProp p :
       {cpu::ConvProp::kForward, cpu::ConvProp::kBackwardData, cpu::ConvProp::kBackwardWeight}) {
    d.prop = p;
    EXPECT_EQ(why(d), "") << cpu::choose_conv(d).str();
  }
  d.prop = cpu::ConvProp::kForward;
  cpu::ConvDesc e = d;
  e.sh = e.sw = 2, e.OH = e.OW = 8;
  EXPECT_NE(why(e).find("not a 3x3 stride-1 conv"), std::string::npos) << why(e);
  e = d, e.blocked_x = false;
  EXPECT_NE(why(e).find("not blocked"), std::string::npos) << why(e);
  e = d, e.C = 24;
  EXPECT_NE(why(e).find("multiples of 16"), std::string::npos) << why(e);
  e = d, e.pt = 3, e.OH = 18;
  EXPECT_NE(why(e).find("padding 3"), std::string::npos) << why(e);
  e = d, e.lanes = 8;  // nChw8c: taken where the vectors hold 8 lanes or fewer (AVX2)
  if (cpu::winograd_takes_lanes(8))
    EXPECT_EQ(why(e), "");
  else
    EXPECT_NE(why(e).find("8 lanes, narrower than this machine's vectors"), std::string::npos)
        << why(e);
  e = d, e.N = 1, e.H = e.W = e.OH = e.OW = 4;  // 4 tiles
  EXPECT_NE(why(e).find("output tiles"), std::string::npos) << why(e);
  // The A/B switch: SPORE_CONV_IMPL=-winograd.
  cpu::ScopedConvImpl off("-winograd");
  EXPECT_STREQ(cpu::choose_conv(d).name(), "onednn");
}

}  // namespace
}  // namespace spore::test
