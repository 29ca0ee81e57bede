// The Optimizer base (optim/optimizer.h): parameter groups, per-parameter learning rates and
// weight decay, the step loop (loss-scale unscaling, global-norm clipping), and the group and
// clipping helpers. Concrete update rules are in optimizers.cpp.
#include "spore/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "spore/autograd.h"
#include "spore/jit.h"
#include "spore/ops.h"

namespace spore::optim {

LearningRate::LearningRate(std::vector<double> per_step) {
  SPORE_CHECK(!per_step.empty(), "[LearningRate] a per-step learning-rate list must not be empty");
  fn = [v = std::move(per_step)](int64_t step) {
    return v[size_t(std::clamp<int64_t>(step, 0, int64_t(v.size()) - 1))];
  };
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, LearningRate lr, double weight_decay)
    : default_lr_(lr) {
  SPORE_CHECK(lr.fn != nullptr, "[Optimizer] the learning rate schedule is empty");
  SPORE_CHECK(weight_decay >= 0, "[Optimizer] weight_decay must be >= 0, got ", weight_decay);
  std::unordered_set<const TensorImpl*> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    const ParamGroup& group = groups[g];
    SPORE_CHECK(group.names.empty() || group.names.size() == group.params.size(),
                "[Optimizer] parameter group ", g, " has ", group.params.size(), " params but ",
                group.names.size(), " names");
    double wd = group.weight_decay.value_or(weight_decay);
    SPORE_CHECK(wd >= 0, "[Optimizer] weight_decay of group ", g, " must be >= 0, got ", wd);
    group_lrs_.push_back(group.lr ? *group.lr : lr);
    // Each non-empty group gets its own hyper tensor, so setting one group's lr later changes a
    // value the compiled step reads, never the graph (the optimizer fusion still takes a whole
    // group into one node).
    if (!group.params.empty()) slot_group_.push_back(g);
    for (size_t j = 0; j < group.params.size(); ++j) {
      const Tensor& p = group.params[j];
      SPORE_CHECK(p.defined(), "[Optimizer] parameter ", j, " of group ", g, " is undefined");
      SPORE_CHECK_TYPE(is_floating(p.dtype()),
                       "[Optimizer] parameters must be floating point, got ", dtype_name(p.dtype()),
                       " for parameter ", j, " of group ", g);
      SPORE_CHECK(seen.insert(p.impl_ptr().get()).second, "[Optimizer] parameter ",
                  group.names.empty() ? std::to_string(j) : group.names[j],
                  " appears twice in the parameter groups");
      params_.push_back(p);
      names_.push_back(group.names.empty() ? "param" + std::to_string(params_.size() - 1)
                                           : group.names[j]);
      weight_decays_.push_back(wd);
      lrs_.push_back(group_lrs_.back());
      group_of_.push_back(g);
      hyper_slot_.push_back(slot_group_.size() - 1);
    }
  }
  SPORE_CHECK(!params_.empty(), "[Optimizer] got an empty parameter list");
}

namespace {
void check_group(const Optimizer& opt, size_t g, size_t n, const char* what) {
  SPORE_CHECK_KIND(ErrorKind::IndexError, g < n, "[", opt.name(), "] ", what, ": group ", g,
                   " does not exist: the optimizer has ", n,
                   " parameter group(s); pass an index below that");
}
}  // namespace

double Optimizer::group_lr(size_t g) const {
  check_group(*this, g, group_lrs_.size(), "group_lr");
  settle();
  return group_lrs_[g].at(step_);
}

const LearningRate& Optimizer::group_lr_schedule(size_t g) const {
  check_group(*this, g, group_lrs_.size(), "group_lr_schedule");
  return group_lrs_[g];
}

void Optimizer::set_group_lr(size_t g, double lr) {
  check_group(*this, g, group_lrs_.size(), "set_group_lr");
  SPORE_CHECK(std::isfinite(lr) && lr >= 0, "[", name(),
              "] set_group_lr: the learning rate of group ", g, " must be finite and >= 0, got ",
              lr, "; pass a rate such as 0.01");
  set_group_lr(g, LearningRate(lr));
}

void Optimizer::set_group_lr(size_t g, LearningRate lr) {
  check_group(*this, g, group_lrs_.size(), "set_group_lr");
  SPORE_CHECK(lr.fn != nullptr, "[", name(), "] set_group_lr: the schedule of group ", g,
              " is empty; pass a rate or a function of the step");
  group_lrs_[g] = std::move(lr);
  for (size_t i = 0; i < params_.size(); ++i)
    if (group_of_[i] == g) lrs_[i] = group_lrs_[g];
}

void Optimizer::set_momentum(double m) {
  SPORE_THROW(ErrorKind::NotImplemented, "[", name(), "] set_momentum(", m,
              "): this optimizer has no momentum coefficient; use Momentum or SGD with momentum > "
              "0 (or leave the momentum alone)");
}

double Optimizer::current_lr() const {
  settle();
  return lrs_.empty() ? 0.0 : lrs_[0].at(step_);
}

void Optimizer::set_loss_scale(double s) {
  SPORE_CHECK(s > 0, "[", name(), "] loss_scale must be > 0, got ", s);
  loss_scale_ = s;
}

void Optimizer::write_hyper() {
  const size_t k = hyper_size();
  if (k == 0) return;
  settle();
  if (hyper_.empty()) {
    // Plain host tensors (not ops): made even while tracing, they stay concrete captures.
    for (size_t s = 0; s < slot_group_.size(); ++s)
      hyper_.push_back(Tensor::empty({int64_t(k)}, kFloat64, params_[0].device()));
  }
  hyper_host_.resize(hyper_.size());
  std::vector<double> host(k);
  for (size_t s = 0; s < hyper_.size(); ++s) {
    hyper_values(group_lrs_[slot_group_[s]].at(step_), host.data());
    if (host == hyper_host_[s]) continue;  // unchanged (a constant rate): no transfer to the device
    hyper_[s].copy_from_host(host.data());  // in place: graphs read it
    hyper_host_[s] = host;
  }
}

Tensor Optimizer::hyper_for(size_t i) const {
  if (!is_tracing() || hyper_size() == 0) return {};
  SPORE_ASSERT(!hyper_.empty(), "[", name(), "] hyper tensors read before write_hyper()");
  const size_t s = hyper_slot_[i];
  if (!gate_.defined()) return hyper_[s];
  // One gated hyper per slot and trace, shared by the slot's updates (so they still fuse).
  if (gated_hyper_.size() != hyper_.size()) gated_hyper_.assign(hyper_.size(), Tensor());
  if (!gated_hyper_[s].defined()) gated_hyper_[s] = concat({hyper_[s], gate_}, 0);
  return gated_hyper_[s];
}

bool Optimizer::hyper_constant_for(int64_t n) const {
  if (n == 0) return true;
  if (hyper_depends_on_step()) return false;
  for (size_t s = 0; s < slot_group_.size(); ++s) {  // step_ itself: the pending steps stay so
    const LearningRate& lr = group_lrs_[slot_group_[s]];
    const double now = lr.at(step_);
    for (int64_t i = 1; i <= n; ++i)
      if (lr.at(step_ + i) != now) return false;
  }
  return true;
}

void Optimizer::set_update_gate(Tensor apply) {
  gated_hyper_.clear();
  if (!apply.defined()) {
    gate_ = Tensor();
    return;
  }
  SPORE_CHECK(is_tracing() && gates_updates(), "[", name(),
              "] set_update_gate: only while tracing, and only for optimizers whose updates all "
              "read the hyper input (gates_updates())");
  SPORE_CHECK(apply.dtype() == kBool && apply.numel() == 1, "[", name(),
              "] set_update_gate: expected a bool scalar, got ", dtype_name(apply.dtype()), " ",
              shape_str(apply.shape()));
  gate_ = apply.to(kFloat64).reshape({1});
}

void Optimizer::release_state(const std::string& replaced_by) {
  free_state();
  replaced_by_ = replaced_by;
}

void Optimizer::step(const std::vector<Tensor>& grads) {
  SPORE_CHECK(replaced_by_.empty(), "[", name(), "] this optimizer's state moved to ", replaced_by_,
              "; step that one (the training cell already does)");
  SPORE_CHECK(grads.size() == params_.size(), "[", name(), "] step() got ", grads.size(),
              " gradients for ", params_.size(), " parameters");
  NoGradGuard no_grad;
  settle();
  if (is_tracing()) write_hyper();  // the traced graph then starts with this step's values
  std::vector<Tensor> g = grads;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined()) continue;
    SPORE_CHECK(g[i].shape() == params_[i].shape(), "[", name(), "] gradient ", i, " (", names_[i],
                ") has shape ", shape_str(g[i].shape()), " but its parameter has shape ",
                shape_str(params_[i].shape()));
    if (g[i].dtype() != params_[i].dtype()) g[i] = g[i].to(params_[i].dtype());
    if (loss_scale_ != 1) g[i] = g[i] * (1.0 / loss_scale_);
  }
  if (clip_norm_ > 0) g = clip_by_global_norm(g, clip_norm_);
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined()) update(i, g[i], lrs_[i].at(step_), weight_decays_[i]);
  ++step_;
}

std::vector<Tensor> Optimizer::zeros_like_params() const {
  std::vector<Tensor> out;
  out.reserve(params_.size());
  for (const Tensor& p : params_) out.push_back(zeros_like(p));
  return out;
}

void Optimizer::append_state(std::vector<std::pair<std::string, Tensor>>& out,
                             const std::string& prefix, const std::vector<Tensor>& slots) const {
  for (size_t i = 0; i < slots.size(); ++i) out.emplace_back(prefix + "." + names_[i], slots[i]);
}

// ---- helpers ------------------------------------------------------------------------------------

std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
  std::vector<ParamGroup> g(1);
  g[0].params = std::move(params);
  return g;
}

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::vector<ParamGroup> split_decay_groups(
    const std::vector<std::pair<std::string, Tensor>>& named_params) {
  ParamGroup decay, no_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& [name, p] : named_params) {
    bool skip = ends_with(name, "bias") || ends_with(name, "beta") || ends_with(name, "gamma");
    ParamGroup& g = skip ? no_decay : decay;
    g.params.push_back(p);
    g.names.push_back(name);
  }
  return {std::move(decay), std::move(no_decay)};
}

double global_norm(const std::vector<Tensor>& grads) {
  NoGradGuard no_grad;
  double total = 0;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    // Low-precision squares overflow easily; accumulate in float32 at least.
    Tensor x = itemsize(g.dtype()) < 4 ? g.to(kFloat32) : g;
    total += sum(square(x)).item<double>();
  }
  return std::sqrt(total);
}

std::vector<Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double max_norm) {
  SPORE_CHECK(max_norm > 0, "[clip_by_global_norm] clip_norm must be > 0, got ", max_norm);
  if (is_tracing()) {
    // The norm is not known while tracing: compute the factor as a tensor (float32), 1 where the
    // norm is within max_norm or not a number (as below), so the compiled step clips per run.
    NoGradGuard no_grad;
    Tensor total;
    for (const Tensor& g : grads) {
      if (!g.defined()) continue;
      const Tensor s = sum(square(g.dtype() == kFloat64 ? g : g.to(kFloat32)));
      total = total.defined() ? total + s.to(total.dtype()) : s;
    }
    if (!total.defined()) return grads;
    const Tensor norm = sqrt(total);
    const Tensor coef = where(greater(norm, full_like(norm, max_norm)), reciprocal(norm) * max_norm,
                              ones_like(norm));
    std::vector<Tensor> out;
    out.reserve(grads.size());
    for (const Tensor& g : grads) out.push_back(g.defined() ? g * coef.to(g.dtype()) : g);
    return out;
  }
  double norm = global_norm(grads);
  if (!(norm > max_norm)) return grads;  // also keeps NaN norms visible to the overflow check
  NoGradGuard no_grad;
  double coef = max_norm / norm;
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const Tensor& g : grads) out.push_back(g.defined() ? g * coef : g);
  return out;
}

}  // namespace spore::optim
