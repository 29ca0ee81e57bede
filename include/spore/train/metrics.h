// Evaluation metrics (mindspore.train.Metric family): clear(), update(inputs), eval().
// update() takes {outputs, label} for the classification and regression metrics and {loss} for
// Loss; Model feeds them from WithEvalCell's (loss, outputs, label) via update_eval().
// Labels may be class indices (N) or one-hot / probabilities (N, C). Values accumulate across
// update() calls until clear(); eval() with no samples is an error, as in MindSpore.
// To add a metric: derive from Metric, override clear/update/eval, add its name to make_metric.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore::train {

class Metric {
 public:
  virtual ~Metric() = default;
  virtual void clear() = 0;
  virtual void update(const std::vector<Tensor>& inputs) = 0;
  virtual double eval() const = 0;
  virtual std::string name() const = 0;
  // From an evaluation step's (loss, outputs, label): update({outputs, label}) by default.
  virtual void update_eval(const Tensor& loss, const Tensor& outputs, const Tensor& label) {
    update({outputs, label});
  }
  void update(const Tensor& outputs, const Tensor& label) { update({outputs, label}); }
};
using MetricPtr = std::shared_ptr<Metric>;

// Fraction of samples whose argmax prediction equals the label. Predictions of shape (N) or
// (N, 1) are binary probabilities, thresholded at 0.5.
class Accuracy : public Metric {
 public:
  void clear() override;
  void update(const std::vector<Tensor>& inputs) override;
  using Metric::update;
  double eval() const override;
  std::string name() const override { return "Accuracy"; }

 private:
  int64_t correct_ = 0, total_ = 0;
};

// Fraction of samples whose label is among the k highest-scoring classes.
class TopKCategoricalAccuracy : public Metric {
 public:
  explicit TopKCategoricalAccuracy(int64_t k);
  void clear() override;
  void update(const std::vector<Tensor>& inputs) override;
  using Metric::update;
  double eval() const override;
  std::string name() const override { return "TopKCategoricalAccuracy"; }
  int64_t k() const { return k_; }

 private:
  int64_t k_, correct_ = 0, total_ = 0;
};
class Top1CategoricalAccuracy : public TopKCategoricalAccuracy {
 public:
  Top1CategoricalAccuracy() : TopKCategoricalAccuracy(1) {}
};
class Top5CategoricalAccuracy : public TopKCategoricalAccuracy {
 public:
  Top5CategoricalAccuracy() : TopKCategoricalAccuracy(5) {}
};

// Confusion counts matrix[label][prediction] over num_classes (grown on the fly when 0).
class ConfusionMatrix : public Metric {
 public:
  explicit ConfusionMatrix(int64_t num_classes = 0);
  void clear() override;
  void update(const std::vector<Tensor>& inputs) override;
  using Metric::update;
  // Overall accuracy: trace / total. The matrix itself is matrix().
  double eval() const override;
  std::string name() const override { return "ConfusionMatrix"; }
  const std::vector<std::vector<int64_t>>& matrix() const { return m_; }
  int64_t num_classes() const { return int64_t(m_.size()); }
  int64_t total() const { return total_; }

 private:
  bool fixed_;
  std::vector<std::vector<int64_t>> m_;
  int64_t total_ = 0;
};

// Per-class precision TP / (TP + FP), recall TP / (TP + FN) and F1 = 2PR / (P + R) (0 where the
// denominator is 0); eval() is the macro average (mean over classes), per_class() each class.
class ClassificationMetric : public Metric {
 public:
  void clear() override { cm_.clear(); }
  void update(const std::vector<Tensor>& inputs) override { cm_.update(inputs); }
  using Metric::update;
  double eval() const override;
  virtual std::vector<double> per_class() const = 0;

 protected:
  std::vector<double> precisions() const;
  std::vector<double> recalls() const;
  ConfusionMatrix cm_;
};
class Precision : public ClassificationMetric {
 public:
  std::vector<double> per_class() const override;
  std::string name() const override { return "Precision"; }
};
class Recall : public ClassificationMetric {
 public:
  std::vector<double> per_class() const override;
  std::string name() const override { return "Recall"; }
};
class F1 : public ClassificationMetric {
 public:
  std::vector<double> per_class() const override;
  std::string name() const override { return "F1"; }
};

// MindSpore's MSE / MAE: the summed squared (absolute) error of every element, divided by the
// number of samples (dim 0), so a (N, D) output counts D errors per sample.
class MSE : public Metric {
 public:
  void clear() override;
  void update(const std::vector<Tensor>& inputs) override;
  using Metric::update;
  double eval() const override;
  std::string name() const override { return "MSE"; }

 private:
  double sum_ = 0;
  int64_t n_ = 0;
};
class MAE : public Metric {
 public:
  void clear() override;
  void update(const std::vector<Tensor>& inputs) override;
  using Metric::update;
  double eval() const override;
  std::string name() const override { return "MAE"; }

 private:
  double sum_ = 0;
  int64_t n_ = 0;
};

// Mean of the losses given to update({loss}) (a vector loss is averaged first).
class Loss : public Metric {
 public:
  void clear() override;
  void update(const std::vector<Tensor>& inputs) override;
  using Metric::update;
  void update_eval(const Tensor& loss, const Tensor&, const Tensor&) override { update({loss}); }
  double eval() const override;
  std::string name() const override { return "Loss"; }

 private:
  double sum_ = 0;
  int64_t n_ = 0;
};

// "accuracy"/"acc", "top_1_accuracy", "top_5_accuracy", "top_k_categorical_accuracy" (k = 5),
// "precision", "recall", "f1", "mse", "mae", "loss", "confusion_matrix". Unknown names throw,
// listing the known ones.
MetricPtr make_metric(const std::string& name);
std::vector<std::string> metric_names();

}  // namespace spore::train
