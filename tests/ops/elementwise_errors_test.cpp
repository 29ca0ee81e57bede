// Elementwise ops beyond the op table: error messages (bad broadcasts, unsupported dtypes), result
// dtypes (comparisons, logical ops, scalar promotion, integer division), IEEE special values on
// the SIMD paths (NaN, +-inf, overflow, tails) and long rows split across threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_table.h"
#include "test_util.h"

namespace spore::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using ::spore::test::error_of;

TEST(ElementwiseErrors, BadBroadcastNamesOpAndShapes) {
  const std::string msg = error_of([] { add(zeros({2, 3}), zeros({4})); });
  EXPECT_NE(msg.find("[add]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4,)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot be broadcast"), std::string::npos) << msg;
  const std::string m2 = error_of([] { less(zeros({5, 1, 2}), zeros({3, 3})); });
  EXPECT_NE(m2.find("[less]"), std::string::npos) << m2;
  const std::string m3 = error_of([] { where(ones({2}, kBool), zeros({2}), zeros({3})); });
  EXPECT_NE(m3.find("[where]"), std::string::npos) << m3;
}

TEST(ElementwiseErrors, UnsupportedDtypeIsTypeError) {
  try {
    neg(ones({3}, kBool));
    FAIL() << "neg(bool) should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::TypeError);
    EXPECT_NE(std::string(e.what()).find("[neg]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bool"), std::string::npos) << e.what();
  }
  EXPECT_NE(error_of([] { clamp(ones({2}), std::nullopt, std::nullopt); }).find("clamp"),
            std::string::npos);
}

TEST(ElementwiseDtypes, ComparisonsAndLogicalGiveBool) {
  const Tensor a = tensor({1, 2, 3}, kInt32), b = tensor({0.5, 2, 4});
  EXPECT_EQ(equal(a, b).dtype(), kBool);
  EXPECT_EQ(greater(a, b).dtype(), kBool);
  EXPECT_EQ(less_equal(b, b).dtype(), kBool);
  EXPECT_EQ(logical_and(a, b).dtype(), kBool);
  EXPECT_EQ(logical_xor(tensor({0, 1}, kUInt8), tensor({0.0, 0.0})).dtype(), kBool);
  EXPECT_EQ(logical_not(b).dtype(), kBool);
  EXPECT_EQ(greater(a, b).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(logical_not(tensor({0, -2, 0.5})).to_vector<int>(), (std::vector<int>{1, 0, 0}));
}

TEST(ElementwiseDtypes, ScalarPromotion) {
  const Tensor i32 = tensor({1, 2, 3}, kInt32);
  EXPECT_EQ((i32 + 2.0).dtype(), kInt32);    // integer-valued scalar keeps the tensor's dtype
  EXPECT_EQ((i32 * 2.5).dtype(), kFloat32);  // fractional scalar: float32
  EXPECT_EQ(((i32 * 2.5).to_vector<double>()), (std::vector<double>{2.5, 5, 7.5}));
  EXPECT_EQ((tensor({1}, kFloat16) + 2.5).dtype(), kFloat16);
  EXPECT_EQ((tensor({1}, kBFloat16) * 3.0).dtype(), kBFloat16);
  EXPECT_EQ((tensor({1}, kFloat64) - 1.0).dtype(), kFloat64);
  EXPECT_EQ((ones({2}, kBool) + 1.0).dtype(), kInt64);
  EXPECT_EQ((tensor({1, 2}, kInt8) - 1.0).dtype(), kInt8);
  EXPECT_EQ((3.0 - tensor({1, 2}, kUInt8)).dtype(), kUInt8);
  EXPECT_EQ(add(tensor({1}, kInt8), tensor({1}, kUInt8)).dtype(), kInt32);
  EXPECT_EQ(add(tensor({1}, kInt64), tensor({1}, kFloat16)).dtype(), kFloat16);
  EXPECT_EQ(mul(tensor({1}, kFloat16), tensor({1}, kBFloat16)).dtype(), kFloat32);
}

TEST(ElementwiseDtypes, IntegerDivisionAndTranscendentalsGiveFloat32) {
  const Tensor a = tensor({7, -7, 1}, kInt32), b = tensor({2, 2, 3}, kInt64);
  const Tensor q = a / b;
  EXPECT_EQ(q.dtype(), kFloat32);
  std::vector<float> qv = q.to_vector<float>();
  EXPECT_FLOAT_EQ(qv[0], 3.5f);
  EXPECT_FLOAT_EQ(qv[1], -3.5f);
  EXPECT_FLOAT_EQ(qv[2], 1.0f / 3);
  EXPECT_EQ(reciprocal(tensor({4}, kInt32)).dtype(), kFloat32);
  EXPECT_EQ(pow(tensor({2}, kInt32), 2.0).dtype(), kFloat32);
  for (auto f :
       {+[](const Tensor& x) { return exp(x); }, +[](const Tensor& x) { return sqrt(x); },
        +[](const Tensor& x) { return sigmoid(x); }, +[](const Tensor& x) { return gelu(x); }}) {
    EXPECT_EQ(f(tensor({1, 2}, kInt64)).dtype(), kFloat32);
  }
  EXPECT_NEAR(exp(tensor({2}, kInt32)).item<double>(), std::exp(2.0), 1e-5);
  // Ops that stay in the integer dtype.
  EXPECT_EQ(neg(tensor({1}, kInt8)).dtype(), kInt8);
  EXPECT_EQ(abs(tensor({-3}, kInt64)).item<int64_t>(), 3);
  EXPECT_EQ(relu(tensor({-3, 4}, kInt32)).to_vector<int>(), (std::vector<int>{0, 4}));
  EXPECT_EQ(floor(tensor({3}, kInt32)).dtype(), kInt32);
  EXPECT_EQ(clamp(tensor({1, 5}, kInt32), 1.5, std::nullopt).dtype(), kFloat32);
  EXPECT_EQ(where(tensor({1, 0}, kBool), tensor({1, 2}, kInt32), tensor({0.5, 0.25})).dtype(),
            kFloat32);
}

// Special values through the float32 SIMD paths (and float64 / libm) must match IEEE / numpy.
TEST(ElementwiseSpecial, IeeeValues) {
  const double nan = std::nan("");
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    auto ev = [&](Tensor (*f)(const Tensor&), std::vector<double> in) {
      return f(from_vector(in, {int64_t(in.size())}).to(dt)).to_vector<double>();
    };
    auto e = ev(spore::exp, {kInf, -kInf, 1000, -1000, nan, 0});
    EXPECT_EQ(e[0], kInf);
    EXPECT_EQ(e[1], 0);
    EXPECT_EQ(e[2], kInf);
    EXPECT_EQ(e[3], 0);
    EXPECT_TRUE(std::isnan(e[4]));
    EXPECT_EQ(e[5], 1);
    auto l = ev(spore::log, {0, -1, kInf, nan, 1, -0.0});
    EXPECT_EQ(l[0], -kInf);
    EXPECT_TRUE(std::isnan(l[1]));
    EXPECT_EQ(l[2], kInf);
    EXPECT_TRUE(std::isnan(l[3]));
    EXPECT_EQ(l[4], 0);
    EXPECT_EQ(l[5], -kInf);
    auto t = ev(spore::tanh, {nan, kInf, -kInf, 30});
    EXPECT_TRUE(std::isnan(t[0]));
    EXPECT_EQ(t[1], 1);
    EXPECT_EQ(t[2], -1);
    EXPECT_EQ(t[3], 1);
    auto s = ev(spore::sigmoid, {-kInf, kInf, -200, 200, nan});
    EXPECT_EQ(s[0], 0);
    EXPECT_EQ(s[1], 1);
    EXPECT_NEAR(s[2], 0, 1e-30);
    EXPECT_EQ(s[3], 1);
    EXPECT_TRUE(std::isnan(s[4]));
    // The same values 8 times over: rows long enough for the SIMD kernels, not only their tails.
    std::vector<double> special;
    for (int i = 0; i < 8; ++i)
      special.insert(special.end(), {-kInf, kInf, -200, 200, nan, -0.0, -87.0, 87.5});
    const auto sv = ev(spore::sigmoid, special), su = ev(spore::silu, special);
    for (size_t i = 0; i < special.size(); i += 8) {
      EXPECT_EQ(sv[i], 0);
      EXPECT_EQ(sv[i + 1], 1);
      EXPECT_NEAR(sv[i + 2], 0, 1e-30);
      EXPECT_EQ(sv[i + 3], 1);
      EXPECT_TRUE(std::isnan(sv[i + 4]));
      EXPECT_EQ(sv[i + 5], 0.5);
      EXPECT_NEAR(sv[i + 6], 1 / (1 + std::exp(87.0)), 1e-6 / (1 + std::exp(87.0)));
      EXPECT_EQ(sv[i + 7], 1);
      EXPECT_EQ(su[i + 1], kInf);
      EXPECT_NEAR(su[i + 2], 0, 1e-30);
      EXPECT_EQ(su[i + 3], 200);
      EXPECT_TRUE(std::isnan(su[i + 4]));
      EXPECT_TRUE(su[i + 5] == 0 && std::signbit(su[i + 5]));  // -0 stays -0
      EXPECT_NEAR(su[i + 6], -87.0 / (1 + std::exp(87.0)), 1e-6 * 87 / (1 + std::exp(87.0)));
      EXPECT_EQ(su[i + 7], 87.5);
    }
    auto sn = ev(spore::sin, {1e6, -123456.5, kInf, nan});
    EXPECT_NEAR(sn[0], std::sin(1e6), 1e-6);
    EXPECT_NEAR(sn[1], std::sin(-123456.5), 1e-6);
    EXPECT_TRUE(std::isnan(sn[2]));
    EXPECT_TRUE(std::isnan(sn[3]));
    auto sq = ev(spore::sqrt, {-1, kInf, 0});
    EXPECT_TRUE(std::isnan(sq[0]));
    EXPECT_EQ(sq[1], kInf);
    EXPECT_EQ(sq[2], 0);
    auto r = ev(spore::relu, {nan, -kInf, kInf});
    EXPECT_TRUE(std::isnan(r[0]));
    EXPECT_EQ(r[1], 0);
    EXPECT_EQ(r[2], kInf);
    const Tensor mx = maximum(from_vector(std::vector<double>{nan, 1, 2}, {3}).to(dt),
                              from_vector(std::vector<double>{1, nan, 1}, {3}).to(dt));
    auto m = mx.to_vector<double>();
    EXPECT_TRUE(std::isnan(m[0]));
    EXPECT_TRUE(std::isnan(m[1]));
    EXPECT_EQ(m[2], 2);
  }
}

// Long rows take the SIMD + multi-thread path; compare against a double loop, including tails.
TEST(ElementwiseSpecial, LongRowsMatchScalar) {
  for (int64_t n : {int64_t(1), int64_t(15), int64_t(17), int64_t(100003)}) {
    set_seed(uint64_t(n));
    const Tensor a = uniform({n}, -3, 3), b = uniform({n}, 0.5, 2);
    const std::vector<double> va = values(a), vb = values(b);
    const std::vector<double> add_v = values(a + b), div_v = values(a / b), exp_v = values(exp(a)),
                              bcast = values(a * b.slice(0, 0, 1)), gl = values(gelu(a, true));
    for (int64_t i = 0; i < n; ++i) {
      const double x = va[size_t(i)], y = vb[size_t(i)];
      ASSERT_NEAR(add_v[size_t(i)], x + y, 1e-5) << i;
      ASSERT_NEAR(div_v[size_t(i)], x / y, 1e-5 * (1 + std::fabs(x / y))) << i;
      ASSERT_NEAR(exp_v[size_t(i)], std::exp(x), 1e-5 * std::exp(x)) << i;
      ASSERT_NEAR(bcast[size_t(i)], x * vb[0], 1e-5 * (1 + std::fabs(x))) << i;
      const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
      ASSERT_NEAR(gl[size_t(i)], 0.5 * x * (1 + std::tanh(u)), 1e-5 * (1 + std::fabs(x))) << i;
    }
  }
  // bfloat16 through the float buffer path.
  const Tensor h = linspace(-4, 4, 1001, kBFloat16);
  const std::vector<double> hv = values(h), ev = values(exp(h));
  for (size_t i = 0; i < hv.size(); ++i)
    ASSERT_NEAR(ev[i], std::exp(hv[i]), 1e-2 * std::exp(hv[i])) << i;
}

TEST(ElementwiseGrad, RulesOnSimplePoints) {
  // relu routes the gradient where x > 0; maximum to the larger input (ties to the first).
  Tensor x = tensor({-1, 2, 3}).set_requires_grad();
  Tensor y = tensor({0, 2, 1}).set_requires_grad();
  auto g = autograd::grad(add(relu(x), maximum(x, y)).sum(), {x, y});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0, 2, 2}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{1, 0, 0}));
  // Broadcast gradients are summed back to the input's shape by the engine.
  Tensor b = tensor({1.0}).set_requires_grad();
  auto gb = autograd::grad(mul(ones({2, 3}), b).sum(), {b});
  EXPECT_EQ(gb[0].shape(), (Shape{1}));
  EXPECT_DOUBLE_EQ(gb[0].item<double>(), 6);
}

// Gradient rules are written with ops, so differentiating them again gives second derivatives
// (the rules recompute forward outputs when the backward pass is recorded).
TEST(ElementwiseGrad, SecondOrder) {
  const std::vector<double> xs = {-1.5, -0.3, 0.4, 2.0};
  auto second = [&](Tensor (*f)(const Tensor&)) {
    Tensor x = from_vector(xs, {4}).set_requires_grad();
    Tensor g = autograd::grad(f(x).sum(), {x}, {.create_graph = true})[0];
    return values(autograd::grad(g.sum(), {x})[0]);
  };
  const auto t = second(spore::tanh), s = second(spore::sigmoid), e = second(spore::exp),
             r = second(spore::reciprocal);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], th = std::tanh(x), sg = 1 / (1 + std::exp(-x));
    EXPECT_NEAR(t[i], -2 * th * (1 - th * th), 1e-12) << x;
    EXPECT_NEAR(s[i], sg * (1 - sg) * (1 - 2 * sg), 1e-12) << x;
    EXPECT_NEAR(e[i], std::exp(x), 1e-12) << x;
    EXPECT_NEAR(r[i], 2 / (x * x * x), 1e-10) << x;
  }
}

}  // namespace
}  // namespace spore::test
