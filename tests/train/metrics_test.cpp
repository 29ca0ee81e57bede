// Metrics against values counted by hand.
#include "spore/train/metrics.h"

#include <gtest/gtest.h>

using namespace spore;
using namespace spore::train;

namespace {
// 4 samples, 3 classes. Predicted (argmax): 1, 0, 2, 2; labels: 1, 0, 1, 2.
Tensor scores() {
  return tensor({{0.1, 0.8, 0.1}, {0.7, 0.2, 0.1}, {0.2, 0.3, 0.5}, {0.1, 0.1, 0.8}});
}
Tensor labels() { return tensor({1, 0, 1, 2}, kInt32); }
}  // namespace

TEST(Metrics, Accuracy) {
  Accuracy acc;
  EXPECT_THROW(acc.eval(), Error);  // no samples yet
  acc.update(scores(), labels());
  EXPECT_DOUBLE_EQ(acc.eval(), 0.75);
  // One-hot labels, accumulating: 3 + 1 correct of 4 + 2.
  acc.update(tensor({{0.9, 0.1, 0.0}, {0.9, 0.1, 0.0}}), tensor({{1, 0, 0}, {0, 0, 1}}));
  EXPECT_DOUBLE_EQ(acc.eval(), 4.0 / 6.0);
  acc.clear();
  acc.update(tensor({0.2, 0.7, 0.6}), tensor({0, 1, 0}));  // binary probabilities
  EXPECT_DOUBLE_EQ(acc.eval(), 2.0 / 3.0);
  EXPECT_THROW(acc.update(scores(), tensor({1, 0}, kInt32)), Error);        // N mismatch
  EXPECT_THROW(acc.update(scores(), tensor({1, 0, 3, 1}, kInt32)), Error);  // class 3 of 3
}

TEST(Metrics, TopK) {
  TopKCategoricalAccuracy top2(2);
  top2.update(tensor({{0.5, 0.3, 0.2}, {0.5, 0.3, 0.2}, {0.5, 0.3, 0.2}}),
              tensor({1, 2, 0}, kInt32));
  EXPECT_DOUBLE_EQ(top2.eval(), 2.0 / 3.0);
  Top1CategoricalAccuracy top1;
  top1.update(scores(), labels());
  EXPECT_DOUBLE_EQ(top1.eval(), 0.75);
  Top5CategoricalAccuracy top5;
  EXPECT_THROW(top5.update(scores(), labels()), Error);  // k = 5 > 3 classes
}

TEST(Metrics, PrecisionRecallF1) {
  // Per class: TP 1/1/1; predicted counts 1, 1, 2; actual counts 1, 2, 1.
  Precision p;
  Recall r;
  F1 f;
  for (Metric* m : std::vector<Metric*>{&p, &r, &f}) m->update(scores(), labels());
  std::vector<double> pc = p.per_class(), rc = r.per_class(), fc = f.per_class();
  EXPECT_DOUBLE_EQ(pc[0], 1.0);
  EXPECT_DOUBLE_EQ(pc[1], 1.0);
  EXPECT_DOUBLE_EQ(pc[2], 0.5);
  EXPECT_DOUBLE_EQ(rc[0], 1.0);
  EXPECT_DOUBLE_EQ(rc[1], 0.5);
  EXPECT_DOUBLE_EQ(rc[2], 1.0);
  EXPECT_DOUBLE_EQ(fc[1], 2 * 0.5 / 1.5);
  EXPECT_DOUBLE_EQ(fc[2], 2 * 0.5 / 1.5);
  EXPECT_DOUBLE_EQ(p.eval(), 2.5 / 3);
  EXPECT_DOUBLE_EQ(r.eval(), 2.5 / 3);
  EXPECT_DOUBLE_EQ(f.eval(), (1 + 2.0 / 3 + 2.0 / 3) / 3);
}

TEST(Metrics, ConfusionMatrix) {
  ConfusionMatrix cm(3);
  cm.update(scores(), labels());
  auto m = cm.matrix();
  EXPECT_EQ(m[0], (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(m[1], (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(m[2], (std::vector<int64_t>{0, 0, 1}));
  EXPECT_DOUBLE_EQ(cm.eval(), 0.75);
  cm.clear();
  EXPECT_EQ(cm.matrix()[1][2], 0);
  ConfusionMatrix small(2);
  EXPECT_THROW(small.update(scores(), labels()), Error);
}

TEST(Metrics, RegressionAndLoss) {
  Tensor pred = tensor({{1.0, 2.0}, {3.0, 4.0}}), y = tensor({{1.5, 2.0}, {2.0, 6.0}});
  MSE mse;
  MAE mae;
  mse.update(pred, y);
  mae.update(pred, y);
  // Squared errors 0.25 + 0 + 1 + 4 over 2 samples; absolute 0.5 + 0 + 1 + 2 over 2.
  EXPECT_DOUBLE_EQ(mse.eval(), 5.25 / 2);
  EXPECT_DOUBLE_EQ(mae.eval(), 3.5 / 2);
  Loss loss;
  loss.update({scalar_tensor(1.0)});
  loss.update({tensor({2.0, 4.0})});  // a vector loss counts as its mean
  EXPECT_DOUBLE_EQ(loss.eval(), 2.0);
  loss.update_eval(scalar_tensor(5.0), pred, y);
  EXPECT_DOUBLE_EQ(loss.eval(), 3.0);
}

TEST(Metrics, ByName) {
  for (const std::string& n : metric_names()) EXPECT_NE(make_metric(n), nullptr) << n;
  EXPECT_EQ(make_metric("acc")->name(), "Accuracy");
  EXPECT_EQ(make_metric("top_5_accuracy")->name(), "TopKCategoricalAccuracy");
  try {
    make_metric("acuracy");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown metric 'acuracy'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'accuracy'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'confusion_matrix'"), std::string::npos) << msg;
  }
}
