// The constant-weight convolutions (backends/cpu/ops/constant_conv.cpp): Winograd F(2x2, 3x3)
// (backends/cpu/kernels/conv_winograd.cpp) and the direct conv on packed weights (conv_packed.cpp),
// against a convolution in float64 plain loops written here: every epilogue combination (bias,
// folded BatchNorm scale / shift, residual, relu or silu), odd output sizes (Winograd edge tiles
// with one row or column), no padding and asymmetric padding, strides 1 and 2, 1x1 / 3x3 / 5x5
// kernels, the packed conv reading x in place (no padding) and through its bordered copy, several
// channel blocks, counts that leave short blocks and short register tiles, one and several threads,
// activations blocked in 16 lanes and (where this machine's kernels take them: AVX2 and narrower)
// 8; the transformed and packed weights by hand; the shape / dtype errors; and op table rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/kernels/conv_direct.h"  // the Highway target hooks
#include "backends/cpu/kernels/conv_packed.h"
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
  bool winograd;  // else the packed direct conv
  int64_t N, C, H, W, O;
  int64_t pt, pb, pl, pr;
  bool bias, scale, residual;
  const char* act;            // "", "relu", "silu" or "sigmoid"
  int64_t k = 3, stride = 1;  // square kernel, both strides
  int64_t L = 16;             // the activations' channel block (nChw16c or nChw8c)
  bool plain_x = false;       // x plain (N, C, H, W) of any C, y blocked (the packed conv's stem)
  int64_t tile = 2;           // Winograd's output tile: F(2x2, 3x3) or F(4x4, 3x3)
  int64_t OH() const { return (H + pt + pb - k) / stride + 1; }
  int64_t OW() const { return (W + pl + pr - k) / stride + 1; }
};

// The same geometry through Winograd F(4x4, 3x3).
Geo f4(Geo g, const char* name) {
  g.tile = 4;
  g.name = name;
  return g;
}

Geo in_lanes(Geo g, int64_t L) {
  g.L = L;
  return g;
}
// Whether this machine's kernels take activations blocked in L lanes (8: AVX2 and narrower).
bool takes_lanes(const Geo& g) {
  return g.winograd ? cpu::winograd_takes_lanes(g.L) : cpu::packed_takes_lanes(g.L);
}

// act(conv(x, w) * scale + bias * scale + shift + residual) in float64, blocked layouts in and out.
std::vector<double> reference(const Geo& g, const std::vector<double>& xb,
                              const std::vector<double>& w, const std::vector<double>& b,
                              const std::vector<double>& s, const std::vector<double>& sh,
                              const std::vector<double>& rb) {
  const int64_t L = g.L, Cb = g.C / L, Ob = g.O / L, OH = g.OH(), OW = g.OW();
  std::vector<double> y(size_t(g.N * g.O * OH * OW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t i = 0; i < g.k; ++i)
              for (int64_t j = 0; j < g.k; ++j) {
                const int64_t ih = oh * g.stride - g.pt + i, iw = ow * g.stride - g.pl + j;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                const int64_t xi = g.plain_x
                                       ? ((n * g.C + c) * g.H + ih) * g.W + iw
                                       : (((n * Cb + c / L) * g.H + ih) * g.W + iw) * L + c % L;
                acc += xb[size_t(xi)] * w[size_t(((o * g.C + c) * g.k + i) * g.k + j)];
              }
          if (g.bias) acc += b[size_t(o)];
          if (g.scale) acc = acc * s[size_t(o)] + sh[size_t(o)];
          const size_t at = size_t((((n * Ob + o / L) * OH + oh) * OW + ow) * L + o % L);
          if (g.residual) acc += rb[at];
          if (std::string(g.act) == "relu") acc = std::max(acc, 0.0);
          if (std::string(g.act) == "silu") acc = acc / (1 + std::exp(-acc));
          if (std::string(g.act) == "sigmoid") acc = 1 / (1 + std::exp(-acc));
          y[at] = acc;
        }
  return y;
}

Attrs weight_attrs(const Geo& g) {
  Attrs a = Attrs().set("has_bias", g.bias).set("has_scale", g.scale);
  if (g.winograd) a.set("tile", g.tile);
  return a;
}
Attrs conv_attrs(const Geo& g) {
  Attrs a;
  a.set("padding", std::vector<int64_t>{g.pt, g.pb, g.pl, g.pr}).set("has_residual", g.residual);
  a.set("act", g.act);
  if (!g.winograd) a.set("stride", std::vector<int64_t>{g.stride, g.stride});
  if (g.plain_x) a.set("lanes", g.L);
  return a;
}

// Runs the two ops (prepare the weights, convolve) on t = (x_b, w[, bias][, scale, shift][,
// residual_b]).
Tensor run_conv(const Geo& g, const Tensors& t) {
  Tensors wins(t.begin() + 1, t.begin() + 2 + int(g.bias) + 2 * int(g.scale));
  const Tensors ub = ops::call(g.winograd ? cpu::op::WinogradWeights() : cpu::op::PackConvWeights(),
                               wins, weight_attrs(g));
  Tensors ins{t[0], ub[0], ub[1]};
  if (g.residual) ins.push_back(t.back());
  return ops::call(g.winograd ? cpu::op::Conv2dWinograd() : cpu::op::Conv2dPacked(), ins,
                   conv_attrs(g))[0];
}

Tensors make(const Geo& g, uint64_t seed) {
  set_seed(seed);
  Tensors t{g.plain_x ? randn({g.N, g.C, g.H, g.W}) : randn({g.N, g.C / g.L, g.H, g.W, g.L}),
            randn({g.O, g.C, g.k, g.k}) * (1.0 / std::sqrt(double(g.k * g.k * g.C)))};
  if (g.bias) t.push_back(randn({g.O}) * 0.1);
  if (g.scale) {
    t.push_back(rand({g.O}) + 0.5);
    t.push_back(randn({g.O}) * 0.1);
  }
  if (g.residual) t.push_back(randn({g.N, g.O / g.L, g.OH(), g.OW(), g.L}));
  return t;
}

std::vector<double> ref_of(const Geo& g, const Tensors& t) {
  size_t i = 2;
  const auto b = g.bias ? values(t[i++]) : std::vector<double>();
  const auto s = g.scale ? values(t[i++]) : std::vector<double>();
  const auto sh = g.scale ? values(t[i++]) : std::vector<double>();
  const auto r = g.residual ? values(t[i++]) : std::vector<double>();
  return reference(g, values(t[0]), values(t[1]), b, s, sh, r);
}

// |got - want| <= 2e-5 * max |want|: float32 sums in another order (F(2x2, 3x3)'s transforms add
// up to 9 inputs before the multiply), not less accurately.
void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  double scale = 0, worst = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - want[i]));
  EXPECT_LE(worst, 2e-5 * scale) << what << ": worst |diff| " << worst << " of max |y| " << scale;
}

// name, winograd, N, C, H, W, O, pads (t, b, l, r), bias, scale, residual, act[, k, stride]
const Geo kWino[] = {
    {"wino_resnet_block_relu", true, 2, 16, 8, 8, 32, 1, 1, 1, 1, false, true, false, "relu"},
    {"wino_residual_relu", true, 2, 32, 8, 8, 16, 1, 1, 1, 1, false, true, true, "relu"},
    {"wino_bias_only", true, 1, 16, 6, 6, 16, 1, 1, 1, 1, true, false, false, ""},
    {"wino_bias_scale_residual", true, 1, 16, 6, 6, 16, 1, 1, 1, 1, true, true, true, ""},
    {"wino_odd_output", true, 3, 16, 7, 5, 16, 1, 1, 1, 1, false, false, false, "relu"},
    {"wino_no_padding", true, 2, 16, 9, 6, 16, 0, 0, 0, 0, true, false, false, ""},
    {"wino_asymmetric_padding", true, 1, 16, 5, 7, 32, 2, 0, 0, 1, false, true, true, "relu"},
    {"wino_three_channel_blocks", true, 1, 48, 6, 6, 48, 1, 1, 1, 1, false, true, false, "relu"},
    // 2 x 10 x 10 = 200 tiles: blocks of 100 on two threads, register tiles of 6 with 4 left over.
    {"wino_many_tiles", true, 2, 16, 20, 20, 16, 1, 1, 1, 1, true, false, true, "relu"},
    {"wino_one_pixel", true, 1, 16, 1, 1, 16, 1, 1, 1, 1, false, false, false, ""},
};
const Geo kGeos[] = {
    kWino[0],
    kWino[1],
    kWino[2],
    kWino[3],
    kWino[4],
    kWino[5],
    kWino[6],
    kWino[7],
    kWino[8],
    kWino[9],
    // ResNet's downsampling conv and shortcut, the deep 4x4 convs at batch 1.
    {"packed_3x3_stride2", false, 2, 16, 8, 8, 32, 1, 1, 1, 1, false, true, false, "relu", 3, 2},
    {"packed_3x3_stride2_odd", false, 1, 32, 7, 9, 16, 1, 1, 1, 1, true, false, false, "relu", 3,
     2},
    {"packed_1x1_stride2_in_place", false, 2, 16, 8, 8, 32, 0, 0, 0, 0, false, true, false, "", 1,
     2},
    {"packed_3x3_small_map_residual", false, 1, 48, 4, 4, 32, 1, 1, 1, 1, false, true, true,
     "relu"},
    {"packed_3x3_no_padding_in_place", false, 2, 16, 7, 6, 16, 0, 0, 0, 0, true, false, false, ""},
    // Bottom / right padding only: the windows read one row / column past x (the bordered copy).
    {"packed_bottom_right_padding", false, 1, 16, 8, 8, 16, 0, 1, 0, 1, false, false, false, "relu",
     3, 2},
    {"packed_5x5_pad2", false, 2, 16, 9, 9, 16, 2, 2, 2, 2, true, true, true, "relu", 5, 1},
    // 2 x 15 x 15 = 450 pixels: chunks of 192 with a short last one, tiles of 6 with 0 left over.
    {"packed_many_rows", false, 2, 16, 15, 15, 16, 1, 1, 1, 1, false, false, false, "relu"},
    // YOLOv5's conv + BatchNorm + SiLU: 3x3 (Winograd, edge tiles), 3x3 stride 2, 1x1; one with a
    // residual.
    {"wino_silu_odd", true, 2, 16, 7, 9, 32, 1, 1, 1, 1, false, true, false, "silu"},
    {"packed_3x3_stride2_silu", false, 1, 32, 10, 10, 16, 1, 1, 1, 1, false, true, false, "silu", 3,
     2},
    {"packed_1x1_silu_residual", false, 2, 32, 6, 6, 16, 0, 0, 0, 0, true, true, true, "silu", 1,
     1},
    // A plain input of 3 channels into blocked activations (a stem): YOLOv5's 6x6 stride-2 with
    // BatchNorm + SiLU, and a 3x3 with bias + relu (ResNet's CIFAR stem) over two images.
    {"packed_plain_stem_6x6_stride2_silu", false, 1, 3, 20, 18, 32, 2, 2, 2, 2, false, true, false,
     "silu", 6, 2, 16, true},
    {"packed_plain_stem_3x3_relu", false, 2, 3, 9, 7, 16, 1, 1, 1, 1, true, false, false, "relu", 3,
     1, 16, true},
    // Tiles of two output-channel groups (where a vector holds a group: AVX-512), three groups so
    // each chunk's last tile has one; 450 / 800 pixels in chunks of 192 give every thread tasks.
    {"packed_group_pairs_odd", false, 2, 32, 15, 15, 48, 1, 1, 1, 1, false, true, true, "silu"},
    {"packed_plain_stem_group_pairs", false, 2, 3, 20, 20, 48, 1, 1, 1, 1, true, false, false,
     "relu", 3, 1, 16, true},
    // Winograd F(4x4, 3x3): 4x4 tiles, edge tiles cut after 1, 2 or 3 rows / columns (7, 5, 9, 6).
    f4(kWino[0], "wino4_resnet_block_relu"),
    f4(kWino[1], "wino4_residual_relu"),
    f4(kWino[3], "wino4_bias_scale_residual"),
    f4(kWino[4], "wino4_odd_output"),
    f4(kWino[5], "wino4_no_padding"),
    f4(kWino[6], "wino4_asymmetric_padding"),
    f4(kWino[7], "wino4_three_channel_blocks"),
    f4(kWino[8], "wino4_many_tiles"),
    f4(kWino[9], "wino4_one_pixel"),
    f4({"", true, 2, 16, 7, 9, 32, 1, 1, 1, 1, false, true, false, "silu"}, "wino4_silu_odd"),
    // YOLOv5's detect convs: 1x1 with bias and sigmoid (their 255 channels padded to 256 by the
    // constant_convs pass), and a 3x3 Winograd one with sigmoid.
    {"packed_1x1_bias_sigmoid", false, 1, 32, 10, 10, 32, 0, 0, 0, 0, true, false, false, "sigmoid",
     1, 1},
    {"wino_sigmoid", true, 2, 16, 6, 6, 16, 1, 1, 1, 1, true, false, false, "sigmoid"},
};

class ConstantConvGeo : public ::testing::TestWithParam<std::tuple<Geo, int64_t>> {};

TEST_P(ConstantConvGeo, MatchesConvolutionInFloat64) {
  const Geo g = in_lanes(std::get<0>(GetParam()), std::get<1>(GetParam()));
  if (!takes_lanes(g)) GTEST_SKIP() << "this machine's vectors are wider than " << g.L << " lanes";
  const Tensors t = make(g, 7);
  const std::vector<double> want = ref_of(g, t);
  expect_close(run_conv(g, t), want, g.name);
  // One thread: the blocks are cut differently, the result must not change.
  const int threads = get_num_threads();
  set_num_threads(1);
  expect_close(run_conv(g, t), want, std::string(g.name) + " (1 thread)");
  set_num_threads(threads);
}

// Every Highway target this build has and this CPU runs (AVX-512: one vector per 16 channels and
// 12-row tiles of two groups; AVX2: two and 6; SSE4: four and 3), with short tiles, edge tiles and
// strides, in 16 lanes and, on the targets whose vectors hold at most 8, in 8.
TEST(ConstantConv, EveryHighwayTarget) {
  for (const std::string& target : cpu::direct_conv_targets()) {
    cpu::direct_conv_use_target(target);
    for (const Geo& g0 :
         {kGeos[1], kGeos[4], kGeos[8], kGeos[11], kGeos[17], kGeos[18], kGeos[20], kGeos[21],
          kGeos[22], kGeos[23], kGeos[24], kGeos[28], kGeos[32], kGeos[34]}) {
      for (int64_t L : {16, 8}) {
        const Geo g = in_lanes(g0, L);
        if (!takes_lanes(g)) continue;
        const Tensors t = make(g, 11);
        expect_close(run_conv(g, t), ref_of(g, t),
                     std::string(g.name) + " on " + target + " in " + std::to_string(L) + " lanes");
      }
    }
  }
  cpu::direct_conv_use_target("");
}

INSTANTIATE_TEST_SUITE_P(Geos, ConstantConvGeo,
                         ::testing::Combine(::testing::ValuesIn(kGeos),
                                            ::testing::Values(int64_t{16}, int64_t{8})),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_lanes" +
                                  std::to_string(std::get<1>(info.param));
                         });

// u[e][ob][c][l] = (G w Gᵀ)[e] * scale for o = ob * 16 + l, by hand for one (o, c): the all-ones
// kernel gives G 1 Gᵀ = [1 1.5 .5 1]ᵀ [1 1.5 .5 1]; beta = bias * scale + shift.
TEST(Winograd, WeightTransformByHand) {
  const int64_t O = 16, C = 16;
  std::vector<float> w(size_t(O * C * 9), 0.f);
  for (int k = 0; k < 9; ++k) w[size_t((3 * C + 5) * 9 + k)] = 1.f;  // o = 3, c = 5
  std::vector<float> bias(O, 0.f), scale(O, 1.f), shift(O, 0.f);
  bias[3] = 2.f, scale[3] = 0.5f, shift[3] = 0.25f;
  const Tensors ub = ops::call(cpu::op::WinogradWeights(),
                               {from_vector(w, {O, C, 3, 3}), from_vector(bias, {O}),
                                from_vector(scale, {O}), from_vector(shift, {O})},
                               Attrs().set("has_bias", true).set("has_scale", true));
  ASSERT_EQ(ub[0].shape(), (Shape{16, 1, C, 16}));
  const std::vector<float> u = ub[0].to_vector<float>(), beta = ub[1].to_vector<float>();
  const float g1[4] = {1.f, 1.5f, 0.5f, 1.f};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t l = 0; l < 16; ++l) {
          const float want = c == 5 && l == 3 ? g1[i] * g1[j] * 0.5f : 0.f;
          EXPECT_FLOAT_EQ(u[size_t(((i * 4 + j) * C + c) * 16 + l)], want)
              << i << j << " c " << c << " l " << l;
        }
  EXPECT_FLOAT_EQ(beta[3], 2.f * 0.5f + 0.25f);
  EXPECT_FLOAT_EQ(beta[0], 0.f);
}

// wp[ob][i][j][c][l] = w[ob * 16 + l][c][i][j] * scale: one marked element moved by hand.
TEST(PackedConv, WeightPackingByHand) {
  const int64_t O = 32, C = 16, K = 3;
  std::vector<float> w(size_t(O * C * K * K), 0.f);
  w[size_t(((20 * C + 7) * K + 2) * K + 1)] = 3.f;  // o = 20, c = 7, i = 2, j = 1
  std::vector<float> scale(O, 1.f);
  scale[20] = 2.f;
  const Tensors wb = ops::call(cpu::op::PackConvWeights(),
                               {from_vector(w, {O, C, K, K}), from_vector(scale, {O}), zeros({O})},
                               Attrs().set("has_scale", true));
  ASSERT_EQ(wb[0].shape(), (Shape{2, K, K, C, 16}));
  const std::vector<float> wp = wb[0].to_vector<float>();
  const size_t at = size_t((((1 * K + 2) * K + 1) * C + 7) * 16 + 4);  // ob 1, lane 4
  EXPECT_FLOAT_EQ(wp[at], 6.f);
  float others = 0;
  for (size_t i = 0; i < wp.size(); ++i)
    if (i != at) others += std::fabs(wp[i]);
  EXPECT_EQ(others, 0.f);
}

TEST(Winograd, BadInputsAreNamed) {
  auto msg = [](OpId op, const Tensors& t, const Attrs& a) {
    try {
      ops::call(op, t, a);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(cpu::op::WinogradWeights(), {zeros({16, 16, 5, 5})}, Attrs()).find("3x3 weight"),
            std::string::npos);
  EXPECT_NE(
      msg(cpu::op::PackConvWeights(), {zeros({12, 16, 3, 3})}, Attrs()).find("multiple of 16"),
      std::string::npos);
  EXPECT_NE(msg(cpu::op::PackConvWeights(), {zeros({16, 16, 3, 3}), zeros({8})},
                Attrs().set("has_bias", true))
                .find("per-channel inputs must have shape (16)"),
            std::string::npos);
  EXPECT_NE(
      msg(cpu::op::WinogradWeights(), {zeros({8, 16, 3, 3})}, Attrs()).find("multiples of 16"),
      std::string::npos);
  EXPECT_NE(msg(cpu::op::WinogradWeights(), {zeros({16, 16, 3, 3}, kFloat64)}, Attrs())
                .find("float32 only"),
            std::string::npos);
  const Tensor x = zeros({1, 1, 4, 4, 16}), u = zeros({16, 1, 16, 16}), beta = zeros({16});
  const Attrs a = Attrs().set("padding", std::vector<int64_t>{1, 1, 1, 1});
  EXPECT_NE(msg(cpu::op::Conv2dWinograd(), {x, zeros({16, 1, 32, 16}), beta}, a).find("expected u"),
            std::string::npos);
  EXPECT_NE(msg(cpu::op::Conv2dWinograd(), {zeros({1, 16, 4, 4}), u, beta}, a).find("blocked x"),
            std::string::npos);
  EXPECT_NE(
      msg(cpu::op::Conv2dWinograd(), {x, u, beta}, Attrs(a).set("act", "gelu")).find("act must be"),
      std::string::npos);
  EXPECT_NE(msg(cpu::op::Conv2dWinograd(), {x, u, beta, zeros({1, 1, 3, 3, 16})},
                Attrs(a).set("has_residual", true))
                .find("residual must have"),
            std::string::npos);
  const Tensor wp = zeros({1, 3, 3, 16, 16});
  const Attrs pa = Attrs(a).set("stride", std::vector<int64_t>{2, 2});
  EXPECT_NE(
      msg(cpu::op::Conv2dPacked(), {x, zeros({1, 3, 3, 32, 16}), beta}, pa).find("expected wp"),
      std::string::npos);
  EXPECT_NE(msg(cpu::op::Conv2dPacked(), {x, wp, beta},
                Attrs(pa).set("stride", std::vector<int64_t>{0, 1}))
                .find("stride must be"),
            std::string::npos);
  EXPECT_NE(
      msg(cpu::op::Conv2dPacked(), {x, wp, zeros({32})}, pa).find("beta must have shape (16)"),
      std::string::npos);
  EXPECT_EQ(msg(cpu::op::Conv2dPacked(), {x, wp, beta}, pa), "no error");
}

// ---- op table rows: the float64 reference above ------------------------------------------------
std::vector<OpCase> table_cases() {
  const Geo g{"table", true, 2, 16, 5, 6, 16, 1, 1, 1, 1, true, true, true, "relu"};
  const Geo p{"table_packed", false, 2, 16, 7, 6, 16, 1, 1, 1, 1, true, true, true, "relu", 3, 2};
  InputSpec pos{.shape = {g.O}, .lo = 0.5, .hi = 1.5};
  OpCase conv{.name = "conv2d_winograd/bias_scale_residual_relu_odd",
              .op = cpu::op::Conv2dWinograd(),
              .inputs = {{.shape = {g.N, 1, g.H, g.W, 16}},
                         {.shape = {g.O, g.C, 3, 3}, .lo = -0.3, .hi = 0.3},
                         {.shape = {g.O}},
                         pos,
                         {.shape = {g.O}},
                         {.shape = {g.N, 1, g.OH(), g.OW(), 16}}},
              .run = [g](const Tensors& t) -> Tensors { return {run_conv(g, t)}; },
              .reference = [g](const Tensors& t) -> Tensors {
                return {from_values(ref_of(g, t), {g.N, 1, g.OH(), g.OW(), 16}, kFloat64)};
              },
              .dtypes = {kFloat32}};
  OpCase weights{.name = "winograd_weights/all_ones_kernel",
                 .op = cpu::op::WinogradWeights(),
                 .inputs = {{.make =
                                 [] {
                                   return ones({16, 16, 3, 3});
                                 }}},
                 .run = [](const Tensors& t) -> Tensors {
                   return ops::call(cpu::op::WinogradWeights(), t, Attrs());
                 },
                 .reference = [](const Tensors&) -> Tensors {
                   // G 1 Gᵀ = g gᵀ with g = (1, 1.5, .5, 1) for every (o, c); beta 0.
                   const double g1[4] = {1, 1.5, 0.5, 1};
                   std::vector<double> u;
                   for (int e = 0; e < 16; ++e)
                     for (int k = 0; k < 16 * 16; ++k) u.push_back(g1[e / 4] * g1[e % 4]);
                   return {from_values(u, {16, 1, 16, 16}, kFloat64),
                           from_values(std::vector<double>(16, 0.0), {16}, kFloat64)};
                 },
                 .dtypes = {kFloat32}};
  OpCase packed{.name = "conv2d_packed/stride2_bias_scale_residual_relu",
                .op = cpu::op::Conv2dPacked(),
                .inputs = {{.shape = {p.N, 1, p.H, p.W, 16}},
                           {.shape = {p.O, p.C, 3, 3}, .lo = -0.3, .hi = 0.3},
                           {.shape = {p.O}},
                           pos,
                           {.shape = {p.O}},
                           {.shape = {p.N, 1, p.OH(), p.OW(), 16}}},
                .run = [p](const Tensors& t) -> Tensors { return {run_conv(p, t)}; },
                .reference = [p](const Tensors& t) -> Tensors {
                  return {from_values(ref_of(p, t), {p.N, 1, p.OH(), p.OW(), 16}, kFloat64)};
                },
                .dtypes = {kFloat32}};
  OpCase packing{.name = "pack_conv_weights/bias",
                 .op = cpu::op::PackConvWeights(),
                 .inputs = {{.shape = {16, 16, 1, 2}}, {.shape = {16}}},
                 .run = [](const Tensors& t) -> Tensors {
                   return ops::call(cpu::op::PackConvWeights(), t, Attrs().set("has_bias", true));
                 },
                 .reference = [](const Tensors& t) -> Tensors {
                   const auto w = values(
                       t[0]);  // (16, 16, 1, 2) -> (1, 1, 2, 16, 16): [j][c][o] = w[o][c][0][j]
                   std::vector<double> r(w.size());
                   for (int64_t o = 0; o < 16; ++o)
                     for (int64_t c = 0; c < 16; ++c)
                       for (int64_t j = 0; j < 2; ++j)
                         r[size_t((j * 16 + c) * 16 + o)] = w[size_t((o * 16 + c) * 2 + j)];
                   return {from_values(r, {1, 1, 2, 16, 16}, kFloat64), t[1].to(kFloat64)};
                 },
                 .dtypes = {kFloat32}};
  return {conv, weights, packed, packing};
}
SPORE_OP_CASES(table_cases());

}  // namespace
}  // namespace spore::test
