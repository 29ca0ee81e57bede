// The metrics of train/metrics.h. Metrics are host-side bookkeeping: each update() copies its
// batch to host doubles once and counts there.
#include "spore/train/metrics.h"

#include <cmath>
#include <functional>
#include <map>

#include "spore/autograd.h"

namespace spore::train {
namespace {

std::vector<double> host(const Tensor& t) {
  NoGradGuard no_grad;
  return t.detach().contiguous().to_vector<double>();
}

void check_two(const char* who, const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() == 2, "[", who, "] update() needs 2 inputs (y_pred, y), got ",
              inputs.size());
  SPORE_CHECK(inputs[0].defined() && inputs[1].defined(), "[", who,
              "] update() got an undefined "
              "tensor");
}

void check_samples(const char* who, int64_t n) {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, n > 0, "[", who,
                   "] cannot be calculated because the "
                   "number of samples is 0; call update() first");
}

// Row-wise argmax of a row-major (n, c) buffer.
std::vector<int64_t> argmax_rows(const std::vector<double>& v, int64_t n, int64_t c) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (v[size_t(i * c + j)] > v[size_t(i * c + best)]) best = j;
    out[size_t(i)] = best;
  }
  return out;
}

struct Classes {
  std::vector<int64_t> pred, label;
  int64_t num_classes = 0;  // from the prediction's width (2 for binary)
};

// Predicted and true class per sample. y_pred: (N, C) scores, or (N) / (N, 1) binary
// probabilities. y: (N) indices or (N, C) one-hot / probabilities.
Classes classify(const char* who, const Tensor& y_pred, const Tensor& y) {
  Classes c;
  SPORE_CHECK(y_pred.dim() == 1 || y_pred.dim() == 2, "[", who,
              "] y_pred must be (N, C) scores or "
              "(N) binary probabilities, got shape ",
              shape_str(y_pred.shape()));
  int64_t n = y_pred.size(0);
  std::vector<double> p = host(y_pred);
  bool binary = y_pred.dim() == 1 || y_pred.size(1) == 1;
  if (binary) {
    c.num_classes = 2;
    for (double v : p) c.pred.push_back(v > 0.5 ? 1 : 0);
  } else {
    c.num_classes = y_pred.size(1);
    c.pred = argmax_rows(p, n, c.num_classes);
  }
  std::vector<double> l = host(y);
  bool one_hot = y.dim() == 2 && y.size(1) > 1;
  if (one_hot) {
    SPORE_CHECK(y.size(0) == n && (binary || y.size(1) == c.num_classes), "[", who,
                "] one-hot labels ", shape_str(y.shape()), " do not match y_pred ",
                shape_str(y_pred.shape()));
    c.label = argmax_rows(l, n, y.size(1));
  } else {
    SPORE_CHECK(y.numel() == n && y.dim() <= 2, "[", who,
                "] labels must be (N) class indices or "
                "(N, C) one-hot matching y_pred ",
                shape_str(y_pred.shape()), ", got ", shape_str(y.shape()));
    for (double v : l) {
      auto k = int64_t(std::llround(v));
      SPORE_CHECK_INDEX(k >= 0 && (binary || k < c.num_classes), "[", who, "] label ", v,
                        " is out of range for ", c.num_classes, " classes");
      c.label.push_back(binary ? (k > 0 ? 1 : 0) : k);
    }
  }
  return c;
}

}  // namespace

// ---- Accuracy -----------------------------------------------------------------------------------

void Accuracy::clear() { correct_ = total_ = 0; }
void Accuracy::update(const std::vector<Tensor>& inputs) {
  check_two("Accuracy", inputs);
  Classes c = classify("Accuracy", inputs[0], inputs[1]);
  for (size_t i = 0; i < c.pred.size(); ++i) correct_ += c.pred[i] == c.label[i];
  total_ += int64_t(c.pred.size());
}
double Accuracy::eval() const {
  check_samples("Accuracy", total_);
  return double(correct_) / double(total_);
}

// ---- Top-k --------------------------------------------------------------------------------------

TopKCategoricalAccuracy::TopKCategoricalAccuracy(int64_t k) : k_(k) {
  SPORE_CHECK(k >= 1, "[TopKCategoricalAccuracy] k must be >= 1, got ", k);
}
void TopKCategoricalAccuracy::clear() { correct_ = total_ = 0; }
void TopKCategoricalAccuracy::update(const std::vector<Tensor>& inputs) {
  check_two("TopKCategoricalAccuracy", inputs);
  const Tensor& y_pred = inputs[0];
  SPORE_CHECK(y_pred.dim() == 2, "[TopKCategoricalAccuracy] y_pred must be (N, C) scores, got ",
              shape_str(y_pred.shape()));
  int64_t n = y_pred.size(0), c = y_pred.size(1);
  SPORE_CHECK(k_ <= c, "[TopKCategoricalAccuracy] k = ", k_, " exceeds the ", c, " classes");
  Classes cls = classify("TopKCategoricalAccuracy", y_pred, inputs[1]);
  std::vector<double> p = host(y_pred);
  for (int64_t i = 0; i < n; ++i) {
    double target = p[size_t(i * c + cls.label[size_t(i)])];
    int64_t above = 0;  // classes scoring strictly higher than the true one
    for (int64_t j = 0; j < c; ++j) above += p[size_t(i * c + j)] > target;
    correct_ += above < k_;
  }
  total_ += n;
}
double TopKCategoricalAccuracy::eval() const {
  check_samples("TopKCategoricalAccuracy", total_);
  return double(correct_) / double(total_);
}

// ---- ConfusionMatrix ----------------------------------------------------------------------------

ConfusionMatrix::ConfusionMatrix(int64_t num_classes) : fixed_(num_classes > 0) {
  SPORE_CHECK(num_classes >= 0, "[ConfusionMatrix] num_classes must be >= 0, got ", num_classes);
  m_.assign(size_t(num_classes), std::vector<int64_t>(size_t(num_classes), 0));
}
void ConfusionMatrix::clear() {
  for (auto& row : m_) std::fill(row.begin(), row.end(), 0);
  if (!fixed_) m_.clear();
  total_ = 0;
}
void ConfusionMatrix::update(const std::vector<Tensor>& inputs) {
  check_two("ConfusionMatrix", inputs);
  Classes c = classify("ConfusionMatrix", inputs[0], inputs[1]);
  if (fixed_) {
    SPORE_CHECK(c.num_classes <= num_classes(), "[ConfusionMatrix] y_pred has ", c.num_classes,
                " classes, the matrix ", num_classes());
  } else if (c.num_classes > num_classes()) {
    size_t k = size_t(c.num_classes);
    for (auto& row : m_) row.resize(k, 0);
    m_.resize(k, std::vector<int64_t>(k, 0));
  }
  for (size_t i = 0; i < c.pred.size(); ++i) ++m_[size_t(c.label[i])][size_t(c.pred[i])];
  total_ += int64_t(c.pred.size());
}
double ConfusionMatrix::eval() const {
  check_samples("ConfusionMatrix", total_);
  int64_t trace = 0;
  for (size_t i = 0; i < m_.size(); ++i) trace += m_[i][i];
  return double(trace) / double(total_);
}

// ---- Precision / Recall / F1 --------------------------------------------------------------------

std::vector<double> ClassificationMetric::precisions() const {
  check_samples(name().c_str(), cm_.total());
  const auto& m = cm_.matrix();
  std::vector<double> out(m.size());
  for (size_t k = 0; k < m.size(); ++k) {
    int64_t predicted = 0;  // column sum: TP + FP
    for (size_t r = 0; r < m.size(); ++r) predicted += m[r][k];
    out[k] = predicted ? double(m[k][k]) / double(predicted) : 0.0;
  }
  return out;
}
std::vector<double> ClassificationMetric::recalls() const {
  check_samples(name().c_str(), cm_.total());
  const auto& m = cm_.matrix();
  std::vector<double> out(m.size());
  for (size_t k = 0; k < m.size(); ++k) {
    int64_t actual = 0;  // row sum: TP + FN
    for (int64_t v : m[k]) actual += v;
    out[k] = actual ? double(m[k][k]) / double(actual) : 0.0;
  }
  return out;
}
double ClassificationMetric::eval() const {
  std::vector<double> v = per_class();
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}
std::vector<double> Precision::per_class() const { return precisions(); }
std::vector<double> Recall::per_class() const { return recalls(); }
std::vector<double> F1::per_class() const {
  std::vector<double> p = precisions(), r = recalls(), f(p.size());
  for (size_t k = 0; k < p.size(); ++k)
    f[k] = p[k] + r[k] > 0 ? 2 * p[k] * r[k] / (p[k] + r[k]) : 0;
  return f;
}

// ---- MSE / MAE ---------------------------------------------------------------------------------

namespace {
// Sum of f(pred - label) over all elements; labels are reshaped to y_pred's shape.
double error_sum(const char* who, const std::vector<Tensor>& inputs,
                 const std::function<double(double)>& f, int64_t* samples) {
  check_two(who, inputs);
  const Tensor &y_pred = inputs[0], &y = inputs[1];
  SPORE_CHECK(y_pred.numel() == y.numel(), "[", who, "] y_pred ", shape_str(y_pred.shape()),
              " and y ", shape_str(y.shape()), " have different numbers of elements");
  std::vector<double> p = host(y_pred), l = host(y);
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += f(p[i] - l[i]);
  *samples += y_pred.dim() == 0 ? 1 : y_pred.size(0);
  return s;
}
}  // namespace

void MSE::clear() { sum_ = 0, n_ = 0; }
void MSE::update(const std::vector<Tensor>& inputs) {
  sum_ += error_sum(
      "MSE", inputs, [](double d) { return d * d; }, &n_);
}
double MSE::eval() const {
  check_samples("MSE", n_);
  return sum_ / double(n_);
}
void MAE::clear() { sum_ = 0, n_ = 0; }
void MAE::update(const std::vector<Tensor>& inputs) {
  sum_ += error_sum(
      "MAE", inputs, [](double d) { return std::abs(d); }, &n_);
}
double MAE::eval() const {
  check_samples("MAE", n_);
  return sum_ / double(n_);
}

// ---- Loss ---------------------------------------------------------------------------------------

void Loss::clear() { sum_ = 0, n_ = 0; }
void Loss::update(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() == 1 && inputs[0].defined(),
              "[Loss] update() needs 1 input (the "
              "loss), got ",
              inputs.size());
  SPORE_CHECK(inputs[0].dim() <= 1 && inputs[0].numel() > 0,
              "[Loss] the loss must be a scalar or "
              "a vector, got shape ",
              shape_str(inputs[0].shape()));
  std::vector<double> v = host(inputs[0]);
  double s = 0;
  for (double x : v) s += x;
  sum_ += s / double(v.size());
  ++n_;
}
double Loss::eval() const {
  check_samples("Loss", n_);
  return sum_ / double(n_);
}

// ---- by name ------------------------------------------------------------------------------------

namespace {
const std::vector<std::pair<std::string, std::function<MetricPtr()>>>& registry() {
  static const std::vector<std::pair<std::string, std::function<MetricPtr()>>> r = {
      {"accuracy", [] { return std::make_shared<Accuracy>(); }},
      {"acc", [] { return std::make_shared<Accuracy>(); }},
      {"top_1_accuracy", [] { return std::make_shared<Top1CategoricalAccuracy>(); }},
      {"top_5_accuracy", [] { return std::make_shared<Top5CategoricalAccuracy>(); }},
      {"top_k_categorical_accuracy", [] { return std::make_shared<TopKCategoricalAccuracy>(5); }},
      {"precision", [] { return std::make_shared<Precision>(); }},
      {"recall", [] { return std::make_shared<Recall>(); }},
      {"f1", [] { return std::make_shared<F1>(); }},
      {"mse", [] { return std::make_shared<MSE>(); }},
      {"mae", [] { return std::make_shared<MAE>(); }},
      {"loss", [] { return std::make_shared<Loss>(); }},
      {"confusion_matrix", [] { return std::make_shared<ConfusionMatrix>(); }},
  };
  return r;
}
}  // namespace

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const auto& [n, _] : registry()) out.push_back(n);
  return out;
}

MetricPtr make_metric(const std::string& name) {
  for (const auto& [n, make] : registry())
    if (n == name) return make();
  std::string known;
  for (const auto& [n, _] : registry()) known += (known.empty() ? "'" : ", '") + n + "'";
  SPORE_THROW(ErrorKind::ValueError, "[make_metric] unknown metric '", name,
              "'; known metrics: ", known);
}

}  // namespace spore::train
