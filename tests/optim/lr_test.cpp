// Learning-rate schedules against the examples in MindSpore's documentation (exact doubles).
#include "spore/optim/lr.h"

#include <gtest/gtest.h>

using namespace spore;
using namespace spore::optim;

namespace {
void expect_list(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "step " << i;
}
}  // namespace

TEST(Lr, PiecewiseConstant) {
  expect_list(piecewise_constant_lr({2, 5, 10}, {0.1, 0.05, 0.01}),
              {0.1, 0.1, 0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01});
  EXPECT_THROW(piecewise_constant_lr({2, 2}, {0.1, 0.2}), Error);
  EXPECT_THROW(piecewise_constant_lr({2}, {0.1, 0.2}), Error);
  auto s = piecewise_constant({2, 5}, {0.1, 0.05});
  EXPECT_EQ(s(1), 0.1);
  EXPECT_EQ(s(2), 0.05);
  EXPECT_EQ(s(100), 0.05);
}

TEST(Lr, CosineDecay) {
  expect_list(cosine_decay_lr(0.01, 0.1, 6, 2, 2),
              {0.1, 0.1, 0.05500000000000001, 0.05500000000000001, 0.01, 0.01});
  auto s = cosine_decay(0.01, 0.1, 4);
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_DOUBLE_EQ(s(2), 0.05500000000000001);
  EXPECT_DOUBLE_EQ(s(4), 0.01);
  EXPECT_DOUBLE_EQ(s(9), 0.01);
  EXPECT_THROW(cosine_decay_lr(0.1, 0.01, 6, 2, 2), Error);
}

TEST(Lr, ExponentialDecay) {
  expect_list(exponential_decay_lr(0.1, 0.9, 6, 2, 1),
              {0.1, 0.1, 0.09000000000000001, 0.09000000000000001, 0.08100000000000002,
               0.08100000000000002});
  expect_list(exponential_decay_lr(0.1, 0.9, 6, 1, 2, true), {0.1, 0.1, 0.09, 0.09, 0.081, 0.081});
  auto s = exponential_decay(0.1, 0.9, 4, true);
  EXPECT_DOUBLE_EQ(s(3), 0.1);
  EXPECT_DOUBLE_EQ(s(4), 0.09000000000000001);
}

TEST(Lr, NaturalExpAndInverseDecay) {
  expect_list(natural_exp_decay_lr(0.1, 0.9, 6, 2, 2, true),
              {0.1, 0.1, 0.1, 0.1, 0.016529888822158657, 0.016529888822158657});
  expect_list(inverse_decay_lr(0.1, 0.5, 6, 1, 1),
              {0.1, 0.06666666666666667, 0.05, 0.04, 0.03333333333333333, 0.028571428571428574});
}

TEST(Lr, PolynomialDecay) {
  expect_list(polynomial_decay_lr(0.1, 0.01, 6, 2, 2, 0.5),
              {0.1, 0.1, 0.07363961030678928, 0.07363961030678928, 0.01, 0.01});
  // update_decay_epoch: after epoch 2 the decay period becomes 4 epochs.
  auto v = polynomial_decay_lr(0.1, 0.01, 8, 1, 2, 1.0, true);
  EXPECT_DOUBLE_EQ(v[2], 0.01);                // epoch 2 of period 2
  EXPECT_DOUBLE_EQ(v[3], 0.09 * 0.25 + 0.01);  // epoch 3 of period 4
  auto s = polynomial_decay(0.1, 0.01, 4, 0.5);
  EXPECT_DOUBLE_EQ(s(2), 0.07363961030678928);
  EXPECT_DOUBLE_EQ(s(10), 0.01);
}

TEST(Lr, Warmup) {
  expect_list(warmup_lr(0.1, 6, 2, 2), {0.0, 0.0, 0.05, 0.05, 0.1, 0.1});
  auto s = warmup(0.1, 2);
  EXPECT_DOUBLE_EQ(s(1), 0.05);
  EXPECT_DOUBLE_EQ(s(5), 0.1);
}

TEST(Lr, LinearWarmupIntoSchedule) {
  auto s = linear_warmup(cosine_decay(0.0, 0.1, 10), 4);
  EXPECT_DOUBLE_EQ(s(0), 0.025);
  EXPECT_DOUBLE_EQ(s(3), 0.1);
  EXPECT_DOUBLE_EQ(s(4), 0.1);   // the schedule's step 0
  EXPECT_DOUBLE_EQ(s(14), 0.0);  // its step 10
}

TEST(Lr, LearningRateForms) {
  LearningRate c = 0.5;
  EXPECT_EQ(c.at(7), 0.5);
  LearningRate list = std::vector<double>{0.3, 0.2};
  EXPECT_EQ(list.at(0), 0.3);
  EXPECT_EQ(list.at(5), 0.2);
  LearningRate f = warmup(1.0, 4);
  EXPECT_EQ(f.at(2), 0.5);
  EXPECT_THROW(LearningRate(std::vector<double>{}), Error);
}
