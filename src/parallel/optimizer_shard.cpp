// Optimizer sharding, ZeRO stage 1 (parallel/parallel.h: ShardedOptimizer). Each rank owns one
// contiguous range of the flattened parameters; its optimizer state covers that range only.
#include <algorithm>

#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"

namespace spore::parallel {

ShardedOptimizer::ShardedOptimizer(optim::OptimizerPtr inner, GroupPtr group, bool mean)
    : optim::Optimizer(optim::single_group(inner ? inner->parameters() : std::vector<Tensor>{}),
                       inner ? inner->lr_schedule(0) : optim::LearningRate(0.0), 0.0),
      inner_(std::move(inner)),
      group_(group ? std::move(group) : world()),
      mean_(mean) {
  const std::string who = "[enable_parallel_optimizer] ";
  SPORE_CHECK(inner_->clip_grad_norm() == 0, who, inner_->name(),
              " clips by the global gradient norm (", inner_->clip_grad_norm(),
              "), which a shard cannot compute alone; turn clipping off or "
              "turn off enable_parallel_optimizer");
  const std::vector<Tensor>& params = inner_->parameters();
  const DType dt = params[0].dtype();
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    SPORE_CHECK_TYPE(params[i].dtype() == dt, who,
                     "every parameter must have one dtype to be sharded; ",
                     inner_->parameter_names()[0], " is ", dtype_name(dt), " but ",
                     inner_->parameter_names()[i], " is ", dtype_name(params[i].dtype()));
    SPORE_CHECK(params[i].is_contiguous(), who, "parameter ", inner_->parameter_names()[i],
                " is not contiguous");
    offset_.push_back(total);
    total += params[i].numel();
  }
  const int R = group_->size(), r = group_->rank();
  per_rank_ = (total + R - 1) / R;  // the last rank's range is padded
  begin_ = std::min(total, per_rank_ * r);
  end_ = std::min(total, begin_ + per_rank_);

  // One shard tensor per parameter overlapping [begin_, end_): a view of its elements there,
  // in a group of its own so that it keeps the parameter's lr schedule and weight decay.
  std::vector<optim::ParamGroup> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t a = std::max(begin_, offset_[i]),
                  b = std::min(end_, offset_[i] + params[i].numel());
    if (a >= b) continue;
    Tensor view = params[i].view({-1}).slice(0, a - offset_[i], b - offset_[i]);
    shard_param_.push_back(i);
    shard_views_.push_back(view);
    groups.push_back({.params = {view},
                      .weight_decay = inner_->weight_decay_of(i),
                      .lr = inner_->lr_schedule(i),
                      .names = {inner_->parameter_names()[i]}});
  }
  if (!groups.empty()) {
    shard_ = inner_->rebuild(std::move(groups));
    SPORE_CHECK(shard_ != nullptr, who, "the optimizer ", inner_->name(),
                " cannot be sharded (it does not implement Optimizer::rebuild); use SGD, Momentum, "
                "Adam, AdamWeightDecay, RMSProp or Adagrad (Lamb's trust ratio needs whole "
                "parameters), or turn off enable_parallel_optimizer");
    shard_->set_global_step(inner_->global_step());
    shard_->set_loss_scale(inner_->loss_scale());
  }
  set_global_step(inner_->global_step());
  flat_grads_ = zeros({per_rank_ * R}, dt);
  my_grads_ = zeros({per_rank_}, dt);
  my_params_ = zeros({per_rank_}, dt);
  flat_params_ = zeros({per_rank_ * R}, dt);
  for (size_t j = 0; j < shard_param_.size(); ++j) {
    const size_t i = shard_param_[j];
    const int64_t a = std::max(begin_, offset_[i]) - begin_;
    shard_grads_.push_back(my_grads_.slice(0, a, a + shard_views_[j].numel()));
  }
  inner_->release_state("a ShardedOptimizer (enable_parallel_optimizer)");
}

void ShardedOptimizer::step(const std::vector<Tensor>& grads) {
  const std::vector<Tensor>& params = parameters();
  SPORE_CHECK(grads.size() == params.size(), "[", name(), "] step() got ", grads.size(),
              " gradients for ", params.size(), " parameters");
  NoGradGuard no_grad;
  // The shard counts the steps the wrapper counts (a resume sets the wrapper's: Adam's bias
  // correction reads the shard's).
  if (shard_) shard_->set_global_step(global_step());
  // 1. This rank's full gradients into one flat buffer (an undefined gradient counts as zeros).
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor dst = flat_grads_.slice(0, offset_[i], offset_[i] + params[i].numel());
    if (grads[i].defined()) {
      SPORE_CHECK(grads[i].numel() == params[i].numel(), "[", name(), "] gradient ", i, " has ",
                  grads[i].numel(), " elements, its parameter ", params[i].numel());
      assign(dst, grads[i].reshape({-1}));
    } else {
      assign(dst, scalar_tensor(0.0, dst.dtype()));
    }
  }
  // 2. Every rank's sum (or mean) of its own range.
  group_->reduce_scatter(flat_grads_, my_grads_, mean_ ? ReduceOp::Mean : ReduceOp::Sum);
  // 3. The update of this rank's range, in place in the parameters (the shard tensors are views).
  if (shard_) shard_->step(shard_grads_);
  // 4. Every rank's updated range to every rank.
  for (size_t j = 0; j < shard_param_.size(); ++j) {
    const int64_t a = std::max(begin_, offset_[shard_param_[j]]) - begin_;
    assign(my_params_.slice(0, a, a + shard_views_[j].numel()), shard_views_[j]);
  }
  group_->all_gather(my_params_, flat_params_);
  for (size_t i = 0; i < params.size(); ++i)
    assign(
        params[i],
        flat_params_.slice(0, offset_[i], offset_[i] + params[i].numel()).view(params[i].shape()));
  set_global_step(global_step() + 1);
}

std::vector<std::pair<std::string, Tensor>> ShardedOptimizer::state() const {
  return shard_ ? shard_->state() : std::vector<std::pair<std::string, Tensor>>{};
}

std::string ShardedOptimizer::shard_range() const {
  return std::to_string(begin_) + ":" + std::to_string(end_);
}

size_t ShardedOptimizer::state_bytes() const { return shard_ ? optimizer_state_bytes(*shard_) : 0; }

size_t optimizer_state_bytes(const optim::Optimizer& opt) {
  if (const auto* s = dynamic_cast<const ShardedOptimizer*>(&opt)) return s->state_bytes();
  size_t bytes = 0;
  for (const auto& [name, t] : opt.state()) bytes += size_t(t.numel()) * itemsize(t.dtype());
  return bytes;
}

}  // namespace spore::parallel
