// SGD, Momentum, Adam, AdamWeightDecay, RMSProp, Adagrad and Lamb (optim/optimizers.h). Most
// updates are one call of an in-place primitive (ApplyMomentum / ApplyAdam / ApplyRMSProp, see
// ops.def for the attributes), so a backend that fuses the update speeds up every optimizer; SGD
// with dampening, Adagrad and Lamb (whose trust ratio needs whole-parameter norms) are written with
// elementwise ops and assign.
#include "spore/optim/optimizers.h"

#include <cmath>

#include "ops/op.h"
#include "spore/autograd.h"
#include "spore/ops.h"

namespace spore::optim {
namespace {

using ops::Attrs;
using ops::OpId;

std::vector<ParamGroup> groups_of(std::vector<Tensor> params) {
  return single_group(std::move(params));
}

void check_range(const char* opt, const char* what, double v, double lo, double hi) {
  SPORE_CHECK(v >= lo && v <= hi, "[", opt, "] ", what, " must be in [", lo, ", ", hi, "], got ",
              v);
}

// Runs an update primitive: with a hyper tensor (while tracing) the per-step scalars come from it
// at run time; otherwise they are the attributes `per_step` (PyNative, unchanged).
void call_update(OpId op, ops::Tensors in, Attrs attrs, const Tensor& hyper, bool gated,
                 const Attrs& per_step) {
  if (hyper.defined()) {
    in.push_back(hyper);
    attrs.set("hyper_input", true);
    if (gated) attrs.set("gated", true);  // the hyper ends with the gate (set_update_gate)
  } else {
    for (const auto& [key, v] : per_step.items()) attrs.set(key.c_str(), v);
  }
  ops::call(op, in, attrs);
}

// g + weight_decay * p (L2 regularisation folded into the gradient).
Tensor decayed(const Tensor& grad, const Tensor& p, double wd) {
  return wd == 0 ? grad : grad + p * wd;
}

}  // namespace

// ---- SGD ----------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, LearningRate lr, SGDOptions opts)
    : SGD(groups_of(std::move(params)), std::move(lr), opts) {}

SGD::SGD(std::vector<ParamGroup> groups, LearningRate lr, SGDOptions opts)
    : Optimizer(std::move(groups), std::move(lr), opts.weight_decay), opts_(opts) {
  SPORE_CHECK(opts.momentum >= 0, "[SGD] momentum must be >= 0, got ", opts.momentum);
  check_range("SGD", "dampening", opts.dampening, 0, 1);
  SPORE_CHECK(!opts.nesterov || (opts.momentum > 0 && opts.dampening == 0),
              "[SGD] nesterov needs momentum > 0 and dampening == 0, got momentum ", opts.momentum,
              " and dampening ", opts.dampening);
  set_loss_scale(opts.loss_scale);
  if (opts.momentum > 0) accum_ = zeros_like_params();
  started_.assign(params_.size(), false);
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  append_state(out, "accum", accum_);
  return out;
}

std::shared_ptr<Optimizer> SGD::rebuild(std::vector<ParamGroup> groups) const {
  return std::make_shared<SGD>(std::move(groups), default_lr(), opts_);
}
void SGD::free_state() {
  accum_.clear();
  started_.clear();
}

void SGD::update(size_t i, const Tensor& grad, double lr, double weight_decay) {
  const Tensor& p = params_[i];
  if (opts_.momentum == 0) {  // p -= lr * (g + wd p)
    assign(p, p - decayed(grad, p, weight_decay) * lr);
    return;
  }
  // Without dampening, ApplyMomentum is exactly SGD: accum starts at 0, so the first step gives
  // accum = g as SGD's "buf = g" does.
  if (opts_.dampening == 0) {
    call_update(OpId::ApplyMomentum, {p, accum_[i], grad},
                Attrs().set("nesterov", opts_.nesterov).set("weight_decay", weight_decay),
                hyper_for(i), gated(), Attrs().set("lr", lr).set("momentum", opts_.momentum));
    return;
  }
  Tensor g = decayed(grad, p, weight_decay);
  Tensor buf = started_[i] ? accum_[i] * opts_.momentum + g * (1 - opts_.dampening) : g;
  assign(accum_[i], buf);
  assign(p, p - accum_[i] * lr);
  started_[i] = true;
}

void SGD::set_momentum(double m) {
  SPORE_CHECK(opts_.momentum > 0, "[SGD] set_momentum(", m,
              "): this SGD was built without momentum, so it keeps no momentum buffers; construct "
              "it with SGDOptions{.momentum = ...} > 0 to change the momentum during training");
  SPORE_CHECK(std::isfinite(m) && m > 0,
              "[SGD] set_momentum: momentum must be finite and > 0, got ", m,
              "; pass a value such as 0.9");
  opts_.momentum = m;
}

void SGD::hyper_values(double lr, double* out) const {
  out[0] = lr;
  out[1] = opts_.momentum;
}

// ---- Momentum -----------------------------------------------------------------------------------

Momentum::Momentum(std::vector<Tensor> params, LearningRate lr, double momentum,
                   MomentumOptions opts)
    : Momentum(groups_of(std::move(params)), std::move(lr), momentum, opts) {}

Momentum::Momentum(std::vector<ParamGroup> groups, LearningRate lr, double momentum,
                   MomentumOptions opts)
    : Optimizer(std::move(groups), std::move(lr), opts.weight_decay),
      momentum_(momentum),
      opts_(opts) {
  SPORE_CHECK(momentum >= 0, "[Momentum] momentum must be >= 0, got ", momentum);
  set_loss_scale(opts.loss_scale);
  moments_ = zeros_like_params();
}

std::vector<std::pair<std::string, Tensor>> Momentum::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  append_state(out, "moments", moments_);
  return out;
}

std::shared_ptr<Optimizer> Momentum::rebuild(std::vector<ParamGroup> groups) const {
  return std::make_shared<Momentum>(std::move(groups), default_lr(), momentum_, opts_);
}
void Momentum::free_state() { moments_.clear(); }

void Momentum::update(size_t i, const Tensor& grad, double lr, double weight_decay) {
  call_update(OpId::ApplyMomentum, {params_[i], moments_[i], grad},
              Attrs().set("nesterov", opts_.nesterov).set("weight_decay", weight_decay),
              hyper_for(i), gated(), Attrs().set("lr", lr).set("momentum", momentum_));
}

void Momentum::set_momentum(double m) {
  SPORE_CHECK(std::isfinite(m) && m >= 0,
              "[Momentum] set_momentum: momentum must be finite and >= 0, got ", m,
              "; pass a value such as 0.9");
  momentum_ = m;
}

void Momentum::hyper_values(double lr, double* out) const {
  out[0] = lr;
  out[1] = momentum_;
}

// ---- Adam / AdamWeightDecay -------------------------------------------------------------------

Adam::Adam(std::vector<Tensor> params, LearningRate lr, AdamOptions opts)
    : Adam(groups_of(std::move(params)), std::move(lr), opts, false) {}

Adam::Adam(std::vector<ParamGroup> groups, LearningRate lr, AdamOptions opts)
    : Adam(std::move(groups), std::move(lr), opts, false) {}

Adam::Adam(std::vector<ParamGroup> groups, LearningRate lr, AdamOptions opts, bool decoupled)
    : Optimizer(std::move(groups), std::move(lr), opts.weight_decay),
      opts_(opts),
      decoupled_(decoupled) {
  const char* n = decoupled ? "AdamWeightDecay" : "Adam";
  SPORE_CHECK(opts.beta1 >= 0 && opts.beta1 < 1, "[", n, "] beta1 must be in [0, 1), got ",
              opts.beta1);
  SPORE_CHECK(opts.beta2 >= 0 && opts.beta2 < 1, "[", n, "] beta2 must be in [0, 1), got ",
              opts.beta2);
  SPORE_CHECK(opts.eps > 0, "[", n, "] eps must be > 0, got ", opts.eps);
  set_loss_scale(opts.loss_scale);
  m_ = zeros_like_params();
  v_ = zeros_like_params();
}

std::vector<std::pair<std::string, Tensor>> Adam::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  // MindSpore's names: Adam "moment1"/"moment2", AdamWeightDecay "adam_m"/"adam_v".
  append_state(out, decoupled_ ? "adam_m" : "moment1", m_);
  append_state(out, decoupled_ ? "adam_v" : "moment2", v_);
  return out;
}

std::shared_ptr<Optimizer> Adam::rebuild(std::vector<ParamGroup> groups) const {
  return std::shared_ptr<Optimizer>(new Adam(std::move(groups), default_lr(), opts_, decoupled_));
}
void Adam::free_state() {
  m_.clear();
  v_.clear();
}

void Adam::update(size_t i, const Tensor& grad, double lr, double weight_decay) {
  // The primitive computes p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps') (PyTorch's placement
  // of eps). MindSpore's Adam is p -= lr * sqrt(bc2) / bc1 * m / (sqrt(v) + eps), which is the
  // same with eps' = eps / sqrt(bc2). AdamWeightDecay has no bias correction in MindSpore: a
  // step of 2^62 makes beta^step underflow to 0, so bc1 = bc2 = 1 exactly.
  double h[3];
  hyper_values(lr, h);  // lr, step t, eps'
  call_update(OpId::ApplyAdam, {params_[i], m_[i], v_[i], grad},
              Attrs()
                  .set("beta1", opts_.beta1)
                  .set("beta2", opts_.beta2)
                  .set("weight_decay", weight_decay)
                  .set("decoupled", decoupled_),
              hyper_for(i), gated(),
              Attrs().set("lr", lr).set("eps", h[2]).set("step", int64_t(h[1])));
}

void Adam::hyper_values(double lr, double* out) const {
  const int64_t t = decoupled_ ? (int64_t(1) << 62) : step_ + 1;
  out[0] = lr;
  out[1] = double(t);  // exact: t <= 2^53, or the power of two 2^62
  out[2] = opts_.eps / std::sqrt(1 - std::pow(opts_.beta2, double(t)));
}

namespace {
AdamOptions adam_options(const AdamWeightDecayOptions& o) {
  return {.beta1 = o.beta1,
          .beta2 = o.beta2,
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .loss_scale = o.loss_scale};
}
}  // namespace

AdamWeightDecay::AdamWeightDecay(std::vector<Tensor> params, LearningRate lr,
                                 AdamWeightDecayOptions opts)
    : Adam(groups_of(std::move(params)), std::move(lr), adam_options(opts), true) {}

AdamWeightDecay::AdamWeightDecay(std::vector<ParamGroup> groups, LearningRate lr,
                                 AdamWeightDecayOptions opts)
    : Adam(std::move(groups), std::move(lr), adam_options(opts), true) {}

std::shared_ptr<Optimizer> AdamWeightDecay::rebuild(std::vector<ParamGroup> groups) const {
  return std::make_shared<AdamWeightDecay>(
      std::move(groups), default_lr(),
      AdamWeightDecayOptions{.beta1 = opts_.beta1,
                             .beta2 = opts_.beta2,
                             .eps = opts_.eps,
                             .weight_decay = opts_.weight_decay,
                             .loss_scale = opts_.loss_scale});
}

// ---- RMSProp ------------------------------------------------------------------------------------

RMSProp::RMSProp(std::vector<Tensor> params, LearningRate lr, RMSPropOptions opts)
    : RMSProp(groups_of(std::move(params)), std::move(lr), opts) {}

RMSProp::RMSProp(std::vector<ParamGroup> groups, LearningRate lr, RMSPropOptions opts)
    : Optimizer(std::move(groups), std::move(lr), opts.weight_decay), opts_(opts) {
  check_range("RMSProp", "decay", opts.decay, 0, 1);
  SPORE_CHECK(opts.momentum >= 0, "[RMSProp] momentum must be >= 0, got ", opts.momentum);
  SPORE_CHECK(opts.epsilon > 0, "[RMSProp] epsilon must be > 0, got ", opts.epsilon);
  set_loss_scale(opts.loss_scale);
  // MindSpore (like TensorFlow) starts the mean square at ones, not zeros.
  for (const Tensor& p : params_) ms_.push_back(ones_like(p));
  mom_ = zeros_like_params();
}

std::vector<std::pair<std::string, Tensor>> RMSProp::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  append_state(out, "mean_square", ms_);
  append_state(out, "moment", mom_);
  return out;
}

std::shared_ptr<Optimizer> RMSProp::rebuild(std::vector<ParamGroup> groups) const {
  return std::make_shared<RMSProp>(std::move(groups), default_lr(), opts_);
}
void RMSProp::free_state() {
  ms_.clear();
  mom_.clear();
}

void RMSProp::update(size_t i, const Tensor& grad, double lr, double weight_decay) {
  call_update(
      OpId::ApplyRMSProp, {params_[i], ms_[i], mom_[i], decayed(grad, params_[i], weight_decay)},
      Attrs().set("decay", opts_.decay).set("momentum", opts_.momentum).set("eps", opts_.epsilon),
      hyper_for(i), gated(), Attrs().set("lr", lr));
}

// ---- Adagrad and Lamb: elementwise ops reading the hyper tensor --------------------------------

namespace {
// The per-step scalar k of an update as a 0-d tensor of dtype: element k of the hyper tensor while
// tracing (read at run time), else the value itself.
Tensor per_step(const Tensor& hyper, int64_t k, double value, DType dtype, Device device) {
  if (hyper.defined()) return hyper.select(0, k).to(dtype);
  return scalar_tensor(value, dtype, device);
}
// sqrt(sum(x^2)) over every element: MindSpore's nn.Norm with no axis.
Tensor l2_norm(const Tensor& x) { return sqrt(sum(square(x))); }
}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, LearningRate lr, AdagradOptions opts)
    : Adagrad(groups_of(std::move(params)), std::move(lr), opts) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, LearningRate lr, AdagradOptions opts)
    : Optimizer(std::move(groups), std::move(lr), opts.weight_decay), opts_(opts) {
  SPORE_CHECK(std::isfinite(opts.accum) && opts.accum >= 0,
              "[Adagrad] accum (the accumulator's initial value) must be >= 0, got ", opts.accum);
  SPORE_CHECK(opts.update_slots || opts.accum > 0,
              "[Adagrad] with update_slots=false the accumulator stays at accum, which must then "
              "be > 0 (the update divides by sqrt(accum)); got ",
              opts.accum);
  set_loss_scale(opts.loss_scale);
  for (const Tensor& p : params_) accum_.push_back(full_like(p, opts.accum));
}

std::vector<std::pair<std::string, Tensor>> Adagrad::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  append_state(out, "accum", accum_);
  return out;
}

std::shared_ptr<Optimizer> Adagrad::rebuild(std::vector<ParamGroup> groups) const {
  return std::make_shared<Adagrad>(std::move(groups), default_lr(), opts_);
}
void Adagrad::free_state() { accum_.clear(); }

void Adagrad::update(size_t i, const Tensor& grad, double lr, double weight_decay) {
  const Tensor& p = params_[i];
  const Tensor g = decayed(grad, p, weight_decay);
  Tensor acc = accum_[i];
  if (opts_.update_slots) {
    acc = acc + square(g);
    assign(accum_[i], acc);
  }
  const Tensor lr_t = per_step(hyper_for(i), 0, lr, p.dtype(), p.device());
  assign(p, p - lr_t * g * rsqrt(acc));
}

Lamb::Lamb(std::vector<Tensor> params, LearningRate lr, LambOptions opts)
    : Lamb(groups_of(std::move(params)), std::move(lr), opts) {}

Lamb::Lamb(std::vector<ParamGroup> groups, LearningRate lr, LambOptions opts)
    : Optimizer(std::move(groups), std::move(lr), opts.weight_decay), opts_(opts) {
  SPORE_CHECK(opts.beta1 > 0 && opts.beta1 < 1, "[Lamb] beta1 must be in (0, 1), got ", opts.beta1);
  SPORE_CHECK(opts.beta2 > 0 && opts.beta2 < 1, "[Lamb] beta2 must be in (0, 1), got ", opts.beta2);
  SPORE_CHECK(opts.eps > 0, "[Lamb] eps must be > 0, got ", opts.eps);
  SPORE_CHECK(!opts.trust_ratio_weight_decay || *opts.trust_ratio_weight_decay >= 0,
              "[Lamb] trust_ratio_weight_decay must be >= 0, got ",
              opts.trust_ratio_weight_decay.value_or(0));
  m_ = zeros_like_params();
  v_ = zeros_like_params();
}

std::vector<std::pair<std::string, Tensor>> Lamb::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  append_state(out, "lamb_m", m_);  // MindSpore's prefixes
  append_state(out, "lamb_v", v_);
  return out;
}

void Lamb::free_state() {
  m_.clear();
  v_.clear();
}

void Lamb::hyper_values(double lr, double* out) const {
  const double t = double(step_ + 1);
  out[0] = lr;
  out[1] = 1 - std::pow(opts_.beta1, t);
  out[2] = 1 - std::pow(opts_.beta2, t);
}

void Lamb::update(size_t i, const Tensor& grad, double lr, double weight_decay) {
  const Tensor& p = params_[i];
  // MindSpore computes in float32 (float64 parameters stay float64) and casts back.
  const DType dt = p.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const Device dev = p.device();
  const Tensor hyper = hyper_for(i);
  double h[3];
  hyper_values(lr, h);
  const Tensor lr_t = per_step(hyper, 0, h[0], dt, dev);
  const Tensor bc1 = per_step(hyper, 1, h[1], dt, dev), bc2 = per_step(hyper, 2, h[2], dt, dev);
  const double b1 = opts_.beta1, b2 = opts_.beta2, eps = opts_.eps;
  const Tensor pf = p.to(dt), g = grad.to(dt);
  const Tensor m = m_[i].to(dt) * b1 + g * (1 - b1);
  const Tensor v = v_[i].to(dt) * b2 + square(g) * (1 - b2);
  const Tensor m_hat = m / bc1, v_hat = v / bc2;
  const Tensor w_norm = l2_norm(pf), g_norm = l2_norm(g);
  Tensor r = m_hat * rsqrt(v_hat + eps);
  const double trust_wd = opts_.trust_ratio_weight_decay.value_or(weight_decay);
  if (trust_wd != 0) r = r + pf * trust_wd;
  const Tensor zero = scalar_tensor(0, dt, dev), one = scalar_tensor(1, dt, dev);
  const Tensor nonzero = logical_and(greater(w_norm, zero), greater(g_norm, zero));
  const Tensor trust = clamp(where(nonzero, w_norm / l2_norm(r), one), 0.0, 10.0);
  Tensor upd = m_hat / (sqrt(v_hat) + eps);
  if (weight_decay != 0) upd = upd + pf * weight_decay;
  assign(p, pf - upd * (trust * lr_t));  // assign casts back to the parameter's dtype
  assign(m_[i], m);
  assign(v_[i], v);
}

}  // namespace spore::optim
