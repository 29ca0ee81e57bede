// The blocked-activation convolutions (attrs blocked_x / blocked_y) and the re-layout ops
// to_blocked / from_blocked. Every blocked op is checked against the plain op, whose result is
// re-laid-out by the plain loops below (independent of the kernels' reorders): real channels to
// 1e-5 relative, padding lanes of produced tensors exactly zero. Blocked inputs carry a finite
// non-zero value in their padding lanes, so the kernels must ignore what the padding holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/ops/ops.h"
#include "op_table.h"
#include "ops/op.h"
#include "spore/spore.h"
#include "test_util.h"

namespace spore::test {
namespace {
using ops::Attrs;
using ops::OpId;
using Vec = std::vector<float>;

constexpr float kGarbage = 7.5f;  // what blocked inputs hold in their padding lanes

Shape blocked_shape(const Shape& s) { return {s[0], (s[1] + 15) / 16, s[2], s[3], 16}; }

// (N, C, H, W) values -> (N, Cb, H, W, 16): [n, cb, h, w, l] = [n, cb*16 + l, h, w], pad elsewhere.
Vec block_ref(const Vec& v, const Shape& s, float pad) {
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3], Cb = (C + 15) / 16;
  Vec r(size_t(N * Cb * H * W * 16), pad);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          r[size_t((((n * Cb + c / 16) * H + h) * W + w) * 16 + c % 16)] =
              v[size_t(((n * C + c) * H + h) * W + w)];
  return r;
}
Tensor block_ref(const Tensor& t, float pad = 0) {
  return from_vector(block_ref(t.to_vector<float>(), t.shape(), pad), blocked_shape(t.shape()));
}
// True for the elements of a blocked (N, Cb, H, W, 16) buffer that are padding for C channels.
bool is_pad(size_t i, int64_t C, const Shape& b) {
  const int64_t l = int64_t(i % 16), cb = int64_t(i / 16 / size_t(b[2] * b[3])) % b[1];
  return cb * 16 + l >= C;
}

// got vs want elementwise to 1e-5 relative (of the element, or of the largest |want| near zero);
// with C set (blocked outputs) padding lanes of got must be exactly 0.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what, int64_t C = -1) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Vec g = got.to_vector<float>(), w = want.to_vector<float>();
  float scale = 0;
  for (float v : w) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (C >= 0 && is_pad(i, C, got.shape())) {
      if (g[i] != 0.0f) ++bad, ADD_FAILURE() << what << ": padding element " << i << " is " << g[i];
      continue;
    }
    const float tol = 1e-5f * std::max(std::fabs(w[i]), scale);
    if (!(std::fabs(g[i] - w[i]) <= tol))
      ++bad, ADD_FAILURE() << what << ": element " << i << " " << g[i] << " vs " << w[i];
  }
}

Attrs conv_attrs(int64_t stride, int64_t pad) {
  Attrs a;
  a.set("stride", std::vector<int64_t>{stride, stride})
      .set("padding", std::vector<int64_t>{pad, pad, pad, pad});
  a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
  return a;
}
Attrs with_flags(Attrs a, bool bx, bool by) { return a.set("blocked_x", bx).set("blocked_y", by); }

struct Geo {
  const char* name;
  Shape x, w;
  int64_t stride, pad;
  bool bx, by;
};
const Geo kGeos[] = {
    {"lenet_conv1", {64, 1, 28, 28}, {6, 1, 5, 5}, 1, 2, false, true},
    {"lenet_conv2", {64, 6, 14, 14}, {16, 6, 5, 5}, 1, 0, true, true},
    {"resnet_3x3_s2", {4, 64, 16, 16}, {128, 64, 3, 3}, 2, 1, true, true},
    {"resnet_1x1_s2", {4, 64, 16, 16}, {128, 64, 1, 1}, 2, 0, true, true},
    {"odd_channels_x_only", {3, 20, 9, 9}, {6, 20, 3, 3}, 1, 1, true, false},
    {"odd_channels_both", {3, 6, 9, 9}, {20, 6, 3, 3}, 1, 1, true, true},
};

class BlockedConv : public ::testing::TestWithParam<Geo> {};

TEST_P(BlockedConv, ForwardAndBackwardMatchPlain) {
  const Geo& g = GetParam();
  set_seed(42);
  const Tensor x = uniform(g.x, -1, 1), w = uniform(g.w, -0.5, 0.5);
  const Attrs plain = conv_attrs(g.stride, g.pad), blocked = with_flags(plain, g.bx, g.by);
  const int64_t C = g.x[1], O = g.w[0];
  auto bl = [](const Tensor& t, bool b) { return b ? block_ref(t, kGarbage) : t; };

  // forward
  const Tensor y = ops::call1(OpId::Conv2d, {x, w}, plain);  // (N, O, OH, OW)
  const Tensor yb = ops::call1(OpId::Conv2d, {bl(x, g.bx), w}, blocked);
  if (g.by)
    expect_close(yb, block_ref(y), std::string(g.name) + " forward", O);
  else
    expect_close(yb, y, std::string(g.name) + " forward");

  // backward data: dy -> dx
  const Tensor dy = uniform(y.shape(), -1, 1);
  const Attrs pd = Attrs(plain).set("input_shape", g.x),
              bd = Attrs(blocked).set("input_shape", g.x);
  const Tensor dx = ops::call1(OpId::Conv2dBackwardData, {dy, w}, pd);
  const Tensor dxb = ops::call1(OpId::Conv2dBackwardData, {bl(dy, g.by), w}, bd);
  if (g.bx)
    expect_close(dxb, block_ref(dx), std::string(g.name) + " backward data", C);
  else
    expect_close(dxb, dx, std::string(g.name) + " backward data");

  // backward weight: (dy, x) -> dw, plain OIHW either way
  const Attrs pw = Attrs(plain).set("weight_shape", g.w),
              bw = Attrs(blocked).set("weight_shape", g.w);
  const Tensor dw = ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, pw);
  const Tensor dwb = ops::call1(OpId::Conv2dBackwardWeight, {bl(dy, g.by), bl(x, g.bx)}, bw);
  expect_close(dwb, dw, std::string(g.name) + " backward weight");
}

INSTANTIATE_TEST_SUITE_P(Geometries, BlockedConv, ::testing::ValuesIn(kGeos),
                         [](const ::testing::TestParamInfo<Geo>& i) {
                           return std::string(i.param.name);
                         });

// bfloat16 runs the same way (the comparison is against the plain bfloat16 op, so the tolerance
// only covers different rounding inside oneDNN's implementations).
TEST(BlockedConvBf16, MatchesPlain) {
  set_seed(3);
  const Shape xs{8, 6, 14, 14}, ws{20, 6, 5, 5};
  const Tensor x = uniform(xs, -1, 1).to(kBFloat16), w = uniform(ws, -0.5, 0.5).to(kBFloat16);
  const Attrs plain = conv_attrs(1, 0), blocked = with_flags(plain, true, true);
  auto bl = [](const Tensor& t) { return block_ref(t.to(kFloat32), kGarbage).to(kBFloat16); };
  auto close = [](const Tensor& got, const Tensor& want, const char* what, int64_t C) {
    const Vec g = got.to_vector<float>(), w = want.to_vector<float>();
    ASSERT_EQ(g.size(), w.size()) << what;
    float scale = 0;
    for (float v : w) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < g.size(); ++i) {
      if (C >= 0 && is_pad(i, C, got.shape())) {
        ASSERT_EQ(g[i], 0.0f) << what << " padding " << i;
        continue;
      }
      ASSERT_NEAR(g[i], w[i], 2e-2 * scale) << what << " element " << i;
    }
  };
  const Tensor y = ops::call1(OpId::Conv2d, {x, w}, plain);
  close(ops::call1(OpId::Conv2d, {bl(x), w}, blocked), block_ref(y.to(kFloat32)), "bf16 forward",
        20);
  const Tensor dy = uniform(y.shape(), -1, 1).to(kBFloat16);
  const Tensor dx =
      ops::call1(OpId::Conv2dBackwardData, {dy, w}, Attrs(plain).set("input_shape", xs));
  close(ops::call1(OpId::Conv2dBackwardData, {bl(dy), w}, Attrs(blocked).set("input_shape", xs)),
        block_ref(dx.to(kFloat32)), "bf16 backward data", 6);
  const Tensor dw =
      ops::call1(OpId::Conv2dBackwardWeight, {dy, x}, Attrs(plain).set("weight_shape", ws));
  close(ops::call1(OpId::Conv2dBackwardWeight, {bl(dy), bl(x)},
                   Attrs(blocked).set("weight_shape", ws)),
        dw, "bf16 backward weight", -1);
}

// conv2d_fused with blocked activations (the residual is blocked like y) vs the plain fused op.
void fused_case(const std::string& name, const Shape& xs, const Shape& ws, Attrs post, bool bias,
                bool scale, bool res) {
  set_seed(7);
  const Tensor x = uniform(xs, -1, 1), w = uniform(ws, -0.5, 0.5);
  const int64_t O = ws[0];
  post.set("has_bias", bias).set("has_scale", scale).set("has_residual", res);
  Attrs plain = conv_attrs(1, 1);
  for (const char* k : {"has_bias", "has_scale", "has_residual"}) plain.set(k, post.get_bool(k));
  if (post.has("act")) plain.set("act", post.get_string("act"));
  const Attrs blocked = with_flags(plain, true, true);
  Tensors pin{x, w}, bin{block_ref(x, kGarbage), w};
  if (bias) {
    Tensor b = uniform({O}, -1, 1);
    pin.push_back(b), bin.push_back(b);
  }
  if (scale) {
    Tensor s = uniform({O}, 0.5, 1.5), h = uniform({O}, -1, 1);
    pin.push_back(s), pin.push_back(h), bin.push_back(s), bin.push_back(h);
  }
  if (res) {
    Tensor r = uniform({xs[0], O, xs[2], xs[3]}, -1, 1);
    pin.push_back(r), bin.push_back(block_ref(r, kGarbage));
  }
  const Tensor y = ops::call1(cpu::op::Conv2dFused(), pin, plain);
  const Tensor yb = ops::call1(cpu::op::Conv2dFused(), bin, blocked);
  expect_close(yb, block_ref(y), name, O);
}

TEST(BlockedConvFused, BiasRelu) {
  fused_case("fused bias relu", {8, 6, 14, 14}, {16, 6, 3, 3},
             Attrs().set("act", std::string("relu")), true, false, false);
  fused_case("fused bias relu O=20", {8, 6, 14, 14}, {20, 6, 3, 3},
             Attrs().set("act", std::string("relu")), true, false, false);
}
TEST(BlockedConvFused, ResidualRelu) {
  fused_case("fused residual relu", {4, 64, 8, 8}, {64, 64, 3, 3},
             Attrs().set("act", std::string("relu")), false, false, true);
  fused_case("fused residual relu O=20", {4, 20, 8, 8}, {20, 20, 3, 3},
             Attrs().set("act", std::string("relu")), true, false, true);
}
// A sigmoid maps the padding's 0 to 0.5 and a shift adds to it: the kernel must re-zero it.
TEST(BlockedConvFused, ScaleShiftSigmoidKeepsPaddingZero) {
  fused_case("fused scale shift sigmoid", {4, 6, 8, 8}, {10, 6, 3, 3},
             Attrs().set("act", std::string("sigmoid")), true, true, false);
}

// ---- to_blocked / from_blocked -----------------------------------------------------------------

TEST(BlockedLayout, RoundTripAndPadding) {
  for (const Shape& s :
       {Shape{2, 6, 5, 7}, Shape{3, 16, 4, 4}, Shape{1, 33, 3, 2}, Shape{64, 1, 28, 28}}) {
    const Tensor x = uniform(s, -1, 1);
    const Tensor xb = ops::call1(cpu::op::ToBlocked(), {x});
    ASSERT_EQ(xb.shape(), blocked_shape(s));
    EXPECT_EQ(xb.to_vector<float>(), block_ref(x.to_vector<float>(), s, 0.0f))
        << shape_str(s);  // exact, zero padding
    const Tensor back = ops::call1(cpu::op::FromBlocked(), {xb}, Attrs().set("channels", s[1]));
    ASSERT_EQ(back.shape(), s);
    EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>()) << shape_str(s);
    // from_blocked ignores what the padding holds
    const Tensor dirty =
        from_vector(block_ref(x.to_vector<float>(), s, kGarbage), blocked_shape(s));
    EXPECT_EQ(ops::call1(cpu::op::FromBlocked(), {dirty}, Attrs().set("channels", s[1]))
                  .to_vector<float>(),
              x.to_vector<float>());
  }
}

TEST(BlockedLayout, StridedInputs) {
  // An expand view with zero strides (a broadcast bias-like activation) and a permuted view.
  const Tensor small = uniform({1, 6, 1, 5}, -1, 1);
  const Tensor ex = small.expand({3, 6, 4, 5});
  ASSERT_FALSE(ex.is_contiguous());
  Tensor exb = ops::call1(cpu::op::ToBlocked(), {ex});
  EXPECT_EQ(exb.to_vector<float>(),
            block_ref(ex.contiguous().to_vector<float>(), {3, 6, 4, 5}, 0.0f));
  const Tensor base = uniform({2, 5, 3, 18}, -1, 1);
  const Tensor perm = base.permute({0, 3, 2, 1});  // (2, 18, 3, 5), channels strided by 1
  ASSERT_FALSE(perm.is_contiguous());
  EXPECT_EQ(ops::call1(cpu::op::ToBlocked(), {perm}).to_vector<float>(),
            block_ref(perm.contiguous().to_vector<float>(), {2, 18, 3, 5}, 0.0f));
}

// ---- errors ----------------------------------------------------------------------------------

TEST(BlockedConvErrors, Shapes) {
  const Attrs a = conv_attrs(1, 0);
  std::string m = error_of([&] {
    ops::call1(OpId::Conv2d, {zeros({2, 6, 8, 8}), zeros({16, 6, 3, 3})},
               with_flags(a, true, false));
  });
  EXPECT_NE(m.find("[conv2d] with blocked_x=true and lanes=16 the input must be blocked (N, "
                   "ceil(C/16)=1, H, W, 16) for its C=6 channels, got shape (2, 6, 8, 8)"),
            std::string::npos)
      << m;
  m = error_of([&] {
    ops::call1(OpId::Conv2d, {zeros({2, 2, 8, 8, 16}), zeros({16, 6, 3, 3})},
               with_flags(a, true, true));
  });
  EXPECT_NE(m.find("ceil(C/16)=1"), std::string::npos) << m;
  m = error_of([&] {
    ops::call1(cpu::op::Conv2dFused(),
               {zeros({2, 1, 8, 8, 16}), zeros({16, 6, 3, 3}), zeros({2, 16, 6, 6})},
               with_flags(Attrs(a).set("has_residual", true), true, true));
  });
  EXPECT_NE(m.find("[conv2d_fused] residual must have the output's shape (2, 1, 6, 6, 16)"),
            std::string::npos)
      << m;
  m = error_of([&] {
    ops::call1(OpId::Conv2dBackwardData, {zeros({2, 16, 6, 6}), zeros({16, 6, 3, 3})},
               with_flags(Attrs(a).set("input_shape", Shape{2, 6, 8, 8}), true, true));
  });
  EXPECT_NE(
      m.find("[conv2d_backward_data] with blocked_y=true dy must be the blocked (2, 1, 6, 6, 16)"),
      std::string::npos)
      << m;
  m = error_of([&] {
    ops::call1(OpId::Conv2dBackwardWeight, {zeros({2, 1, 6, 6, 16}), zeros({2, 6, 8, 8})},
               with_flags(Attrs(a).set("weight_shape", Shape{16, 6, 3, 3}), true, true));
  });
  EXPECT_NE(
      m.find(
          "[conv2d_backward_weight] with blocked_x=true and lanes=16 the input x must be blocked"),
      std::string::npos)
      << m;
  m = error_of([&] {
    ops::call1(OpId::Conv2d, {zeros({2, 1, 8, 8, 16}, kFloat64), zeros({16, 6, 3, 3}, kFloat64)},
               with_flags(a, true, true));
  });
  EXPECT_NE(m.find("supports float32, bfloat16 and float16 only, got float64"), std::string::npos)
      << m;
  m = error_of([&] { ops::call1(cpu::op::ToBlocked(), {zeros({6, 8, 8})}); });
  EXPECT_NE(m.find("[to_blocked] expected an input of rank 4 (N, C, H, W), got shape (6, 8, 8)"),
            std::string::npos)
      << m;
  m = error_of([&] {
    ops::call1(cpu::op::FromBlocked(), {zeros({2, 1, 8, 8, 16})},
               Attrs().set("channels", int64_t(20)));
  });
  EXPECT_NE(m.find("[from_blocked] expected a blocked input (N, ceil(C/16)=2, H, W, 16) for "
                   "channels=20, got shape (2, 1, 8, 8, 16)"),
            std::string::npos)
      << m;
  m = error_of([&] { ops::call1(cpu::op::FromBlocked(), {zeros({2, 1, 8, 8, 16})}); });
  EXPECT_NE(m.find("'channels'"), std::string::npos) << m;
}

// ---- op-table rows (registry_test: every primitive has one) ----------------------------------

std::vector<double> block_values(const std::vector<double>& v, const Shape& s) {
  Vec f(v.begin(), v.end());
  Vec b = block_ref(f, s, 0.0f);
  return std::vector<double>(b.begin(), b.end());
}

SPORE_OP_CASES({
    OpCase{.name = "to_blocked/c6",
           .op = cpu::op::ToBlocked(),
           .inputs = {{.shape = {2, 6, 3, 4}}},
           .run = [](const Tensors& t) -> Tensors { return {ops::call1(cpu::op::ToBlocked(), t)}; },
           .reference = [](const Tensors& t) -> Tensors {
             return {
                 from_values(block_values(values(t[0]), {2, 6, 3, 4}), {2, 1, 3, 4, 16}, kFloat64)};
           },
           .dtypes = {kFloat32}},
    OpCase{.name = "from_blocked/c20",
           .op = cpu::op::FromBlocked(),
           .inputs = {{.shape = {2, 2, 3, 4, 16}}},
           .run = [](const Tensors& t) -> Tensors {
             return {ops::call1(cpu::op::FromBlocked(), t, Attrs().set("channels", int64_t(20)))};
           },
           .reference = [](const Tensors& t) -> Tensors {
             const std::vector<double> v = values(t[0]);
             std::vector<double> r;
             for (int64_t n = 0; n < 2; ++n)
               for (int64_t c = 0; c < 20; ++c)
                 for (int64_t i = 0; i < 12; ++i)
                   r.push_back(v[size_t(((n * 2 + c / 16) * 12 + i) * 16 + c % 16)]);
             return {from_values(r, {2, 20, 3, 4}, kFloat64)};
           },
           .dtypes = {kFloat32}},
});

}  // namespace
}  // namespace spore::test
