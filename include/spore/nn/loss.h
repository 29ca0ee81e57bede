// Loss cells, MindSpore's nn losses with MindSpore's defaults; construct(logits, labels).
// Every loss is composite (built from spore/ops.h), so autograd and graph mode need nothing extra,
// and numerically stable: cross-entropies go through log_softmax, BCEWithLogits through softplus.
// reduction: "mean" | "sum" | "none" (LossBase::get_loss). Note MindSpore's defaults differ per
// loss: SoftmaxCrossEntropyWithLogits and SmoothL1Loss default to "none", the others to "mean".
// To add a loss: a class deriving LossBase, its options struct, a construct() in loss.cpp.
#pragma once
#include <string>

#include "spore/nn/cell.h"

namespace spore::nn {

class LossBase : public Cell {
 public:
  LossBase(std::string name, std::string reduction);
  // MindSpore's get_loss: x * weights (when given), then the reduction.
  Tensor get_loss(const Tensor& x, const Tensor& weights = {}) const;
  const std::string& reduction() const { return reduction_; }
  std::string extend_repr() const override { return "reduction=" + reduction_; }

 protected:
  std::string reduction_;
};

// logits (N, C) (classes on the last axis); labels: sparse -> (N,) int32/int64 class indices,
// dense -> (N, C) probabilities. Per-sample loss -sum(labels * log_softmax(logits)).
struct SoftmaxCrossEntropyWithLogitsOptions {
  bool sparse = false;
  std::string reduction = "none";  // MindSpore's default
};
class SoftmaxCrossEntropyWithLogits : public LossBase {
 public:
  explicit SoftmaxCrossEntropyWithLogits(SoftmaxCrossEntropyWithLogitsOptions opt = {});
  Tensor construct(const Tensor& logits, const Tensor& labels) override;

 private:
  bool sparse_;
};

// logits (N, C) or (N, C, d1, ...) (classes on axis 1); labels class indices (N) / (N, d1, ...)
// int32/int64, or probabilities shaped like logits. As torch / MindSpore: "mean" divides by the sum
// of the weights of the non-ignored targets; label smoothing mixes in uniform targets eps / C.
struct CrossEntropyLossOptions {
  Tensor weight{};  // (C,) per-class weights, or undefined
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  double label_smoothing = 0.0;
};
class CrossEntropyLoss : public LossBase {
 public:
  explicit CrossEntropyLoss(CrossEntropyLossOptions opt = {});
  Tensor construct(const Tensor& logits, const Tensor& labels) override;

 private:
  CrossEntropyLossOptions opt_;
};

// input: log-probabilities (N, C) or (N, C, d1, ...); labels class indices.
struct NLLLossOptions {
  Tensor weight{};
  int64_t ignore_index = -100;
  std::string reduction = "mean";
};
class NLLLoss : public LossBase {
 public:
  explicit NLLLoss(NLLLossOptions opt = {});
  Tensor construct(const Tensor& log_probs, const Tensor& labels) override;

 private:
  NLLLossOptions opt_;
};

struct LossOptions {
  std::string reduction = "mean";
};
class MSELoss : public LossBase {  // (x - y)^2
 public:
  explicit MSELoss(LossOptions opt = {}) : LossBase("MSELoss", opt.reduction) {}
  Tensor construct(const Tensor& logits, const Tensor& labels) override;
};
class L1Loss : public LossBase {  // |x - y|
 public:
  explicit L1Loss(LossOptions opt = {}) : LossBase("L1Loss", opt.reduction) {}
  Tensor construct(const Tensor& logits, const Tensor& labels) override;
};

// |d| < beta: 0.5 d^2 / beta, else |d| - 0.5 beta.
struct SmoothL1LossOptions {
  double beta = 1.0;
  std::string reduction = "none";  // MindSpore's default
};
class SmoothL1Loss : public LossBase {
 public:
  explicit SmoothL1Loss(SmoothL1LossOptions opt = {});
  Tensor construct(const Tensor& logits, const Tensor& labels) override;

 private:
  double beta_;
};

// |d| < delta: 0.5 d^2, else delta (|d| - 0.5 delta).
struct HuberLossOptions {
  std::string reduction = "mean";
  double delta = 1.0;
};
class HuberLoss : public LossBase {
 public:
  explicit HuberLoss(HuberLossOptions opt = {});
  Tensor construct(const Tensor& logits, const Tensor& labels) override;

 private:
  double delta_;
};

// -weight * (y log x + (1 - y) log(1 - x)) on probabilities x; each log is clamped at -100 so
// x = 0 or 1 gives a finite loss (as torch does).
struct BCELossOptions {
  Tensor weight{};  // broadcast against the loss, or undefined
  std::string reduction = "mean";
};
class BCELoss : public LossBase {
 public:
  explicit BCELoss(BCELossOptions opt = {});
  Tensor construct(const Tensor& probs, const Tensor& labels) override;

 private:
  Tensor weight_;
};

// On logits x: weight * ((1 - y) x + (1 + (pos_weight - 1) y) softplus(-x)), the stable form of
// -weight * (pos_weight y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))).
struct BCEWithLogitsLossOptions {
  std::string reduction = "mean";
  Tensor weight{};
  Tensor pos_weight{};  // per class (broadcast on the last axis), or undefined
};
class BCEWithLogitsLoss : public LossBase {
 public:
  explicit BCEWithLogitsLoss(BCEWithLogitsLossOptions opt = {});
  Tensor construct(const Tensor& logits, const Tensor& labels) override;

 private:
  Tensor weight_, pos_weight_;
};

}  // namespace spore::nn
