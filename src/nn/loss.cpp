// Loss cells (spore/nn/loss.h), composite: each is a few ops, so gradients come from the ops' own
// rules. Label checks read class indices on the host (cheap next to the forward pass) and are
// skipped for symbolic (traced) tensors, whose values are not known yet.
#include "spore/nn/loss.h"

#include "nn/util.h"
#include "spore/ops.h"

namespace spore::nn {

using detail::fmt;

namespace {

void check_same_shape(const char* who, const Tensor& a, const Tensor& b) {
  SPORE_CHECK(a.shape() == b.shape(), "[", who,
              "] logits and labels must have the same shape, got ", shape_str(a.shape()), " and ",
              shape_str(b.shape()));
}

void check_index_labels(const std::string& who, const Tensor& labels, int64_t classes,
                        const int64_t* ignore_index) {
  SPORE_CHECK_TYPE(labels.dtype() == kInt32 || labels.dtype() == kInt64, "[", who,
                   "] class-index labels must be int32 or int64, got ", dtype_name(labels.dtype()));
  if (labels.is_symbolic()) return;
  for (int64_t v : labels.to_vector<int64_t>()) {
    if (ignore_index && v == *ignore_index) continue;
    SPORE_CHECK_INDEX(
        v >= 0 && v < classes, "[", who, "] label ", v, " out of range [0, ", classes, ")",
        ignore_index ? " (ignore_index is " + std::to_string(*ignore_index) + ")" : "");
  }
}

// Per-element negative log-likelihood of class indices on axis 1 of logp (N, C, d...), with the
// per-element target weights (0 where ignored). Returns {loss (N, d...), weights (N, d...)}.
std::pair<Tensor, Tensor> index_nll(const Tensor& logp, const Tensor& labels, const Tensor& weight,
                                    int64_t ignore_index) {
  const Tensor lab = labels.to(kInt64);
  const Tensor keep = not_equal(lab, full({}, double(ignore_index), kInt64));  // bool
  const Tensor safe = where(keep, lab, zeros({}, kInt64));                     // ignored -> class 0
  const Tensor picked = gather(logp, 1, safe.unsqueeze(1)).squeeze(1);         // (N, d...)
  Tensor w = keep.to(logp.dtype());
  if (weight.defined())
    w = w * index_select(weight.to(logp.dtype()), 0, safe.reshape({-1})).reshape(lab.shape());
  return {-picked * w, w};
}

// A (C,) weight viewed as (1, C, 1, ...) to broadcast against (N, C, d...).
Tensor class_weight_view(const Tensor& weight, const Tensor& like) {
  Shape s(size_t(like.dim()), 1);
  s[1] = weight.numel();
  return weight.to(like.dtype()).reshape(s);
}

void check_weight(const std::string& who, const Tensor& weight, int64_t classes) {
  if (!weight.defined()) return;
  SPORE_CHECK(weight.dim() == 1 && weight.size(0) == classes, "[", who,
              "] weight must have shape (", classes, ",) (one per class), got ",
              shape_str(weight.shape()));
}

}  // namespace

// ---- LossBase -----------------------------------------------------------------------------------
LossBase::LossBase(std::string name, std::string reduction) : reduction_(std::move(reduction)) {
  set_cls_name(name);
  SPORE_CHECK(reduction_ == "mean" || reduction_ == "sum" || reduction_ == "none", "[", name,
              "] reduction must be 'mean', 'sum' or 'none', got '", reduction_, "'");
}

Tensor LossBase::get_loss(const Tensor& x, const Tensor& weights) const {
  const Tensor y = weights.defined() ? x * weights.to(x.dtype()) : x;
  if (reduction_ == "mean") return mean(y);
  if (reduction_ == "sum") return sum(y);
  return y;
}

// ---- softmax cross-entropy ---------------------------------------------------------------------
SoftmaxCrossEntropyWithLogits::SoftmaxCrossEntropyWithLogits(
    SoftmaxCrossEntropyWithLogitsOptions opt)
    : LossBase("SoftmaxCrossEntropyWithLogits", opt.reduction), sparse_(opt.sparse) {}

Tensor SoftmaxCrossEntropyWithLogits::construct(const Tensor& logits, const Tensor& labels) {
  const std::string who = cls_name();
  SPORE_CHECK_TYPE(is_floating(logits.dtype()), "[", who, "] logits must be floating-point, got ",
                   dtype_name(logits.dtype()));
  SPORE_CHECK(logits.dim() >= 1, "[", who, "] logits must have a class axis, got a scalar");
  const int64_t classes = logits.size(-1);
  const Tensor logp = log_softmax(logits, -1);
  if (sparse_) {
    SPORE_CHECK_TYPE(labels.dtype() == kInt32 || labels.dtype() == kInt64, "[", who,
                     "] with sparse=true, labels must be int32 or int64 class indices, got ",
                     dtype_name(labels.dtype()),
                     "; pass sparse=false for one-hot / probability labels");
    const Shape want(logits.shape().begin(), logits.shape().end() - 1);
    SPORE_CHECK(labels.shape() == want, "[", who, "] sparse labels must have shape ",
                shape_str(want), " for logits ", shape_str(logits.shape()), ", got ",
                shape_str(labels.shape()));
    check_index_labels(who, labels, classes, nullptr);
    const Tensor idx = labels.to(kInt64).unsqueeze(-1);
    return get_loss(-gather(logp, -1, idx).squeeze(-1));
  }
  SPORE_CHECK_TYPE(is_floating(labels.dtype()), "[", who,
                   "] with sparse=false, labels must be floating-point probabilities, got ",
                   dtype_name(labels.dtype()), "; pass sparse=true for class-index labels");
  check_same_shape(who.c_str(), logits, labels);
  return get_loss(-sum(labels.to(logp.dtype()) * logp, {-1}));
}

// ---- CrossEntropyLoss / NLLLoss -----------------------------------------------------------------
CrossEntropyLoss::CrossEntropyLoss(CrossEntropyLossOptions opt)
    : LossBase("CrossEntropyLoss", opt.reduction), opt_(std::move(opt)) {
  SPORE_CHECK(opt_.label_smoothing >= 0 && opt_.label_smoothing <= 1,
              "[CrossEntropyLoss] label_smoothing must be in [0, 1], got ",
              fmt(opt_.label_smoothing));
  SPORE_CHECK(!opt_.weight.defined() || opt_.weight.dim() == 1,
              "[CrossEntropyLoss] weight must be 1-d (one per class), got shape ",
              shape_str(opt_.weight.shape()));
}

Tensor CrossEntropyLoss::construct(const Tensor& logits, const Tensor& labels) {
  const std::string who = cls_name();
  SPORE_CHECK_TYPE(is_floating(logits.dtype()), "[", who, "] logits must be floating-point, got ",
                   dtype_name(logits.dtype()));
  SPORE_CHECK(logits.dim() >= 2, "[", who,
              "] expected logits (N, C) or (N, C, d1, ...), got shape ", shape_str(logits.shape()));
  const int64_t classes = logits.size(1);
  check_weight(who, opt_.weight, classes);
  const double eps = opt_.label_smoothing;
  const Tensor logp = log_softmax(logits, 1);

  if (is_floating(labels.dtype())) {  // probabilities, shaped like logits
    check_same_shape(who.c_str(), logits, labels);
    Tensor t = labels.to(logp.dtype());
    if (eps > 0) t = t * (1 - eps) + eps / double(classes);
    Tensor prod = logp * t;
    if (opt_.weight.defined()) prod = prod * class_weight_view(opt_.weight, logp);
    const Tensor per = -sum(prod, {1});  // (N, d...)
    return get_loss(per);                // "mean" averages over N * d...
  }

  Shape want = logits.shape();
  want.erase(want.begin() + 1);
  SPORE_CHECK(labels.shape() == want, "[", who, "] class-index labels must have shape ",
              shape_str(want), " for logits ", shape_str(logits.shape()), ", got ",
              shape_str(labels.shape()));
  check_index_labels(who, labels, classes, &opt_.ignore_index);
  auto [nll, w] = index_nll(logp, labels, opt_.weight, opt_.ignore_index);
  Tensor per = nll;
  if (eps > 0) {
    // Uniform part: -sum_c weight_c logp_c, zero where the target is ignored.
    Tensor wl = opt_.weight.defined() ? logp * class_weight_view(opt_.weight, logp) : logp;
    const Tensor keep = not_equal(labels.to(kInt64), full({}, double(opt_.ignore_index), kInt64));
    const Tensor smooth = -sum(wl, {1}) * keep.to(logp.dtype());
    per = nll * (1 - eps) + smooth * (eps / double(classes));
  }
  if (reduction_ == "none") return per;
  if (reduction_ == "sum") return sum(per);
  return sum(per) / sum(w);
}

NLLLoss::NLLLoss(NLLLossOptions opt) : LossBase("NLLLoss", opt.reduction), opt_(std::move(opt)) {}

Tensor NLLLoss::construct(const Tensor& log_probs, const Tensor& labels) {
  const std::string who = cls_name();
  SPORE_CHECK(log_probs.dim() >= 2, "[", who,
              "] expected input (N, C) or (N, C, d1, ...), got shape ",
              shape_str(log_probs.shape()));
  const int64_t classes = log_probs.size(1);
  check_weight(who, opt_.weight, classes);
  Shape want = log_probs.shape();
  want.erase(want.begin() + 1);
  SPORE_CHECK(labels.shape() == want, "[", who, "] labels must have shape ", shape_str(want),
              " for input ", shape_str(log_probs.shape()), ", got ", shape_str(labels.shape()));
  check_index_labels(who, labels, classes, &opt_.ignore_index);
  auto [nll, w] = index_nll(log_probs, labels, opt_.weight, opt_.ignore_index);
  if (reduction_ == "none") return nll;
  if (reduction_ == "sum") return sum(nll);
  return sum(nll) / sum(w);
}

// ---- regression losses --------------------------------------------------------------------------
Tensor MSELoss::construct(const Tensor& logits, const Tensor& labels) {
  return get_loss(square(logits - labels));
}
Tensor L1Loss::construct(const Tensor& logits, const Tensor& labels) {
  return get_loss(abs(logits - labels));
}

SmoothL1Loss::SmoothL1Loss(SmoothL1LossOptions opt)
    : LossBase("SmoothL1Loss", opt.reduction), beta_(opt.beta) {
  SPORE_CHECK(beta_ > 0, "[SmoothL1Loss] beta must be positive, got ", fmt(beta_));
}
Tensor SmoothL1Loss::construct(const Tensor& logits, const Tensor& labels) {
  const Tensor d = abs(logits - labels);
  const Tensor small = less(d, full({}, beta_, d.dtype()));
  return get_loss(where(small, square(d) * (0.5 / beta_), d - 0.5 * beta_));
}

HuberLoss::HuberLoss(HuberLossOptions opt)
    : LossBase("HuberLoss", opt.reduction), delta_(opt.delta) {
  SPORE_CHECK(delta_ > 0, "[HuberLoss] delta must be positive, got ", fmt(delta_));
}
Tensor HuberLoss::construct(const Tensor& logits, const Tensor& labels) {
  const Tensor d = abs(logits - labels);
  const Tensor small = less(d, full({}, delta_, d.dtype()));
  return get_loss(where(small, square(d) * 0.5, (d - 0.5 * delta_) * delta_));
}

// ---- binary cross-entropy -----------------------------------------------------------------------
BCELoss::BCELoss(BCELossOptions opt)
    : LossBase("BCELoss", opt.reduction), weight_(std::move(opt.weight)) {}
Tensor BCELoss::construct(const Tensor& probs, const Tensor& labels) {
  check_same_shape("BCELoss", probs, labels);
  SPORE_CHECK_TYPE(is_floating(labels.dtype()), "[BCELoss] labels must be floating-point, got ",
                   dtype_name(labels.dtype()));
  const Tensor y = labels.to(probs.dtype());
  const Tensor log_p = clamp(log(probs), -100.0, std::nullopt);
  const Tensor log_1mp = clamp(log(1.0 - probs), -100.0, std::nullopt);
  return get_loss(-(y * log_p + (1.0 - y) * log_1mp), weight_);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BCEWithLogitsLossOptions opt)
    : LossBase("BCEWithLogitsLoss", opt.reduction),
      weight_(std::move(opt.weight)),
      pos_weight_(std::move(opt.pos_weight)) {}
Tensor BCEWithLogitsLoss::construct(const Tensor& logits, const Tensor& labels) {
  check_same_shape("BCEWithLogitsLoss", logits, labels);
  SPORE_CHECK_TYPE(is_floating(labels.dtype()),
                   "[BCEWithLogitsLoss] labels must be floating-point, got ",
                   dtype_name(labels.dtype()));
  const Tensor y = labels.to(logits.dtype());
  const Tensor sp = softplus(-logits);  // -log sigmoid(x), stable for large |x|
  Tensor loss;
  if (pos_weight_.defined()) {
    const Tensor lw = (pos_weight_.to(logits.dtype()) - 1.0) * y + 1.0;
    loss = (1.0 - y) * logits + lw * sp;
  } else {
    loss = (1.0 - y) * logits + sp;
  }
  return get_loss(loss, weight_);
}

}  // namespace spore::nn
