// Error messages and hand-written checks for the reductions, softmax family and indexing ops:
// what the op table cannot express (error kinds and wording, tie handling in gradients, dropout
// statistics and thread-count independence, identities such as dropout(training=false)).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "op_table.h"

namespace spore::test {
namespace {

// Runs f, expects a spore::Error of `kind` whose message contains every part.
template <typename F>
void expect_error(F&& f, ErrorKind kind, std::initializer_list<const char*> parts) {
  try {
    f();
    FAIL() << "expected an error containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    for (const char* p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(ReduceErrors, AxisOutOfRange) {
  Tensor x = zeros({2, 3});
  expect_error([&] { sum(x, {3}); }, ErrorKind::IndexError,
               {"[sum]", "axis 3 is out of range for a tensor of rank 2"});
  expect_error([&] { amax(x, {-3}); }, ErrorKind::IndexError, {"[max]", "axis -3"});
  expect_error([&] { argmax(x, 2); }, ErrorKind::IndexError, {"[argmax]", "axis 2"});
  expect_error([&] { softmax(x, 5); }, ErrorKind::IndexError, {"[softmax]", "axis 5"});
  expect_error([&] { cumsum(x, -4); }, ErrorKind::IndexError, {"[cumsum]", "axis -4"});
  expect_error([&] { sum(x, {1, -1}); }, ErrorKind::IndexError, {"repeated axis"});
}

TEST(ReduceErrors, EmptyMax) {
  expect_error([&] { amax(zeros({3, 0}), {1}); }, ErrorKind::ValueError, {"[max]", "size 0"});
  EXPECT_EQ(sum(zeros({3, 0}), {1}).to_vector<float>(), std::vector<float>(3, 0.0f));
}

TEST(IndexErrors, ConcatShapeMismatchNamesBothShapes) {
  expect_error(
      [&] {
        concat({zeros({2, 3}), zeros({2, 4})}, 0);
      },
      ErrorKind::ValueError, {"[concat]", "(2, 4)", "(2, 3)", "axis 0"});
  expect_error(
      [&] {
        concat({zeros({2, 3}), zeros({2, 3, 1})}, 0);
      },
      ErrorKind::ValueError, {"(2, 3, 1)"});
}

TEST(IndexErrors, GatherIndexDtype) {
  expect_error(
      [&] {
        gather(zeros({2, 3}), 1, zeros({2, 3}));
      },
      ErrorKind::TypeError, {"[gather]", "index must be an integer tensor", "float32"});
  expect_error(
      [&] {
        index_select(zeros({2, 3}), 1, zeros({2}));
      },
      ErrorKind::TypeError, {"[index_select]"});
}

TEST(IndexErrors, IndexValuesOutOfRange) {
  expect_error(
      [&] {
        one_hot(tensor({0, 4, 1}, kInt64), 4);
      },
      ErrorKind::IndexError, {"[one_hot]", "index 4 is out of range for depth 4"});
  expect_error([&] { one_hot(tensor({-1}, kInt32), 3); }, ErrorKind::IndexError, {"index -1"});
  expect_error(
      [&] {
        gather(zeros({2, 3}), 1, tensor({{0, 3}, {1, 1}}, kInt64));
      },
      ErrorKind::IndexError, {"[gather]", "index 3 is out of range for dimension 1 of size 3"});
  expect_error(
      [&] {
        index_select(zeros({2, 3}), 0, tensor({2}, kInt64));
      },
      ErrorKind::IndexError, {"[index_select]", "index 2"});
  expect_error(
      [&] {
        scatter_add(zeros({2, 3}), 0, tensor({{5, 0, 0}}, kInt64), ones({1, 3}));
      },
      ErrorKind::IndexError, {"[scatter_add]", "index 5"});
}

TEST(IndexErrors, BadAttributes) {
  expect_error(
      [&] {
        split(zeros({5, 2}), {2, 2}, 0);
      },
      ErrorKind::ValueError, {"[split]", "add up to 4", "size 5"});
  expect_error([&] { topk(zeros({2, 3}), 4); }, ErrorKind::ValueError, {"[topk]", "k = 4"});
  expect_error([&] { pad(zeros({2}), {1, 1, 1, 1}); }, ErrorKind::ValueError, {"[pad]", "(2,)"});
  expect_error([&] { pad(zeros({2}), {1}); }, ErrorKind::ValueError, {"[pad]", "pairs"});
  expect_error([&] { dropout(zeros({2}), 1.5); }, ErrorKind::ValueError, {"[dropout]", "1.5"});
  expect_error(
      [&] {
        upsample_nearest2d(zeros({2, 3}), {4, 4});
      },
      ErrorKind::ValueError, {"rank 4"});
  expect_error([&] { assign(zeros({2, 3}), zeros({4})); }, ErrorKind::ValueError, {"[assign]"});
  expect_error(
      [&] {
        sum_to_shape(zeros({2, 3}), {2, 4});
      },
      ErrorKind::ValueError, {"[sum_to_shape]"});
}

TEST(ReduceGrad, MaxTiesSplitEvenly) {
  Tensor x = tensor({{1, 3, 3}, {2, 2, 2}}).set_requires_grad();
  Tensor g = autograd::grad(amax(x, {1}).sum(), {x})[0];
  std::vector<float> want = {0, 0.5f, 0.5f, 1.f / 3, 1.f / 3, 1.f / 3};
  std::vector<float> got = g.to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6);
}

TEST(ReduceGrad, SumToShapeAndSumGradient) {
  Tensor x = ones({4, 1, 3});
  Tensor y = sum_to_shape(x.expand({2, 4, 5, 3}), {4, 1, 3});
  EXPECT_EQ(y.shape(), (Shape{4, 1, 3}));
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, 10.0f);
  EXPECT_EQ(sum_to_shape(ones({1, 3}), {3}).shape(), (Shape{3}));
  Tensor w = ones({2, 3}).set_requires_grad();
  Tensor g = autograd::grad(mean(w, {0}).sum(), {w})[0];
  for (float v : g.to_vector<float>()) EXPECT_FLOAT_EQ(v, 0.5f);
}

TEST(Reduce, LogSumExpStableAndVarStd) {
  Tensor x = tensor({1000.0, 1000.0});
  EXPECT_NEAR(logsumexp(x, {0}).item<double>(), 1000.0 + std::log(2.0), 1e-3);
  Tensor ninf = tensor({-INFINITY, -INFINITY});
  EXPECT_TRUE(std::isinf(logsumexp(ninf, {0}).item<double>()));
  Tensor v = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64);
  EXPECT_NEAR(var(v).item<double>(), 1.25, 1e-12);
  EXPECT_NEAR(spore::std(v, {}, 1).item<double>(), std::sqrt(5.0 / 3.0), 1e-12);
}

TEST(Reduce, DtypesOfResults) {
  EXPECT_EQ(sum(ones({3}, kInt32)).dtype(), kInt64);
  EXPECT_EQ(sum(ones({3}, kBool)).item<int64_t>(), 3);
  EXPECT_EQ(mean(ones({3}, kInt32)).dtype(), kFloat32);
  EXPECT_EQ(amax(ones({3}, kInt8)).dtype(), kInt8);
  EXPECT_EQ(argmax(ones({3}), 0).dtype(), kInt64);
  EXPECT_EQ(sum(ones({4}, kFloat16)).dtype(), kFloat16);
  EXPECT_TRUE(std::isnan(amax(tensor({1.0, NAN, 3.0})).item<double>()));
}

TEST(Reduce, LargeHalfSumAccumulatesInFloat) {
  // 4096 halves of 1: a float16 accumulator would stall at 2048.
  EXPECT_EQ(sum(ones({4096}, kFloat16)).item<float>(), 4096.0f);
  EXPECT_EQ(sum(ones({4096, 3}, kBFloat16), {0}).to_vector<float>(),
            std::vector<float>(3, 4096.0f));
}

TEST(Dropout, IdentityWhenNotTrainingOrZero) {
  Tensor x = rand({4, 5});
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0).is_same(x));
}

TEST(Dropout, StatisticsAndScale) {
  set_seed(3);
  Tensor x = ones({200, 100});
  Tensors r = ops::call(ops::OpId::Dropout, {x}, ops::Attrs().set("p", 0.25));
  std::vector<float> y = r[0].to_vector<float>();
  std::vector<double> m = values(r[1]);
  double kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    kept += m[i];
    EXPECT_FLOAT_EQ(y[i], m[i] ? 1.0f / 0.75f : 0.0f);
  }
  EXPECT_NEAR(kept / double(y.size()), 0.75, 0.01);
  // Gradient: g * mask / (1 - p).
  Tensor xr = ones({3, 4}).set_requires_grad();
  set_seed(9);
  Tensors o = ops::call(ops::OpId::Dropout, {xr}, ops::Attrs().set("p", 0.5));
  Tensor g = autograd::grad(o[0].sum(), {xr})[0];
  EXPECT_EQ(g.to_vector<float>(), o[0].detach().to_vector<float>());
}

TEST(Dropout, SameMaskWhateverTheThreadCount) {
  const int prev = get_num_threads();
  Tensor x = ones({300, 301});
  set_num_threads(1);
  set_seed(11);
  std::vector<double> a = values(ops::call(ops::OpId::Dropout, {x}, ops::Attrs().set("p", 0.4))[1]);
  set_num_threads(std::max(2, prev));
  set_seed(11);
  std::vector<double> b = values(ops::call(ops::OpId::Dropout, {x}, ops::Attrs().set("p", 0.4))[1]);
  set_num_threads(prev);
  EXPECT_EQ(a, b);
}

TEST(Index, ChunkStackSortHelpers) {
  auto parts = chunk(arange(10), 4);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[3].shape(), (Shape{1}));
  EXPECT_EQ(stack({ones({2, 3}), zeros({2, 3})}, -1).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(argsort(tensor({3.0, 1.0, 2.0})).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(concat({ones({2}, kInt32), ones({1}, kFloat32)}).dtype(), kFloat32);  // promotes
}

TEST(Index, AssignCastsAndBroadcasts) {
  Tensor dst = zeros({2, 3}, kInt32);
  assign(dst, tensor({1.7, -2.2, 3.0}, kFloat64));
  EXPECT_EQ(dst.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 1, -2, 3}));
}

}  // namespace
}  // namespace spore::test
