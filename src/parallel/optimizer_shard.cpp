// Optimizer sharding, ZeRO stage 1 (parallel/parallel.h: ShardedOptimizer). Each rank owns one
// contiguous range of the flattened parameters of each part (the parameters sharded over one
// group; one part unless the parameters are operator-sharded pieces with different replica
// groups); its optimizer state covers those ranges only.
#include <algorithm>

#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"

namespace spore::parallel {

ShardedOptimizer::ShardedOptimizer(optim::OptimizerPtr inner, GroupPtr group, bool mean)
    : optim::Optimizer(optim::single_group(inner ? inner->parameters() : std::vector<Tensor>{}),
                       inner ? inner->lr_schedule(0) : optim::LearningRate(0.0), 0.0),
      inner_(std::move(inner)),
      mean_(mean) {
  build(std::vector<GroupPtr>(inner_->parameters().size(), group ? group : world()));
}

ShardedOptimizer::ShardedOptimizer(optim::OptimizerPtr inner, std::vector<GroupPtr> group_of_param,
                                   bool mean, bool reduced)
    : optim::Optimizer(optim::single_group(inner ? inner->parameters() : std::vector<Tensor>{}),
                       inner ? inner->lr_schedule(0) : optim::LearningRate(0.0), 0.0),
      inner_(std::move(inner)),
      mean_(mean),
      reduced_(reduced) {
  SPORE_CHECK(group_of_param.size() == inner_->parameters().size(), "[enable_parallel_optimizer] ",
              group_of_param.size(), " groups given for the ", inner_->parameters().size(),
              " parameters of ", inner_->name(), "; give one group per parameter");
  for (GroupPtr& g : group_of_param)
    if (!g) g = world();
  build(group_of_param);
}

void ShardedOptimizer::build(const std::vector<GroupPtr>& group_of_param) {
  const std::string who = "[enable_parallel_optimizer] ";
  SPORE_CHECK(inner_->clip_grad_norm() == 0, who, inner_->name(),
              " clips by the global gradient norm (", inner_->clip_grad_norm(),
              "), which a shard cannot compute alone; turn clipping off or "
              "turn off enable_parallel_optimizer");
  const std::vector<Tensor>& params = inner_->parameters();
  const DType dt = params[0].dtype();
  for (size_t i = 0; i < params.size(); ++i) {
    SPORE_CHECK_TYPE(params[i].dtype() == dt, who,
                     "every parameter must have one dtype to be sharded; ",
                     inner_->parameter_names()[0], " is ", dtype_name(dt), " but ",
                     inner_->parameter_names()[i], " is ", dtype_name(params[i].dtype()));
    SPORE_CHECK(params[i].is_contiguous(), who, "parameter ", inner_->parameter_names()[i],
                " is not contiguous");
    // One part per distinct group, in the order the groups first appear (the same on every rank).
    auto it = std::find_if(parts_.begin(), parts_.end(),
                           [&](const Part& p) { return p.group == group_of_param[i]; });
    if (it == parts_.end()) {
      Part part;
      part.group = group_of_param[i];
      parts_.push_back(std::move(part));
      it = std::prev(parts_.end());
    }
    it->params.push_back(i);
  }
  // One shard tensor per parameter overlapping the part's own range: a view of its elements
  // there, in a group of its own so that it keeps the parameter's lr schedule and weight decay.
  std::vector<optim::ParamGroup> groups;
  for (Part& part : parts_) {
    int64_t total = 0;
    for (size_t i : part.params) {
      part.offset.push_back(total);
      total += params[i].numel();
    }
    const int R = part.group->size(), r = part.group->rank();
    part.per_rank = (total + R - 1) / R;  // the last rank's range is padded
    part.begin = std::min(total, part.per_rank * r);
    part.end = std::min(total, part.begin + part.per_rank);
    for (size_t k = 0; k < part.params.size(); ++k) {
      const size_t i = part.params[k];
      const int64_t a = std::max(part.begin, part.offset[k]),
                    b = std::min(part.end, part.offset[k] + params[i].numel());
      if (a >= b) continue;
      Tensor view = params[i].view({-1}).slice(0, a - part.offset[k], b - part.offset[k]);
      part.shard_param.push_back(k);
      part.shard_views.push_back(view);
      groups.push_back({.params = {view},
                        .weight_decay = inner_->weight_decay_of(i),
                        .lr = inner_->lr_schedule(i),
                        .names = {inner_->parameter_names()[i]}});
    }
    part.flat_grads = zeros({part.per_rank * R}, dt);
    part.my_grads = zeros({part.per_rank}, dt);
    part.my_params = zeros({part.per_rank}, dt);
    part.flat_params = zeros({part.per_rank * R}, dt);
    for (size_t j = 0; j < part.shard_param.size(); ++j) {
      const int64_t a = std::max(part.begin, part.offset[part.shard_param[j]]) - part.begin;
      part.shard_grads.push_back(part.my_grads.slice(0, a, a + part.shard_views[j].numel()));
      shard_grads_.push_back(part.shard_grads.back());
    }
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
  for (Part& part : parts_) {
    // 1. This rank's full gradients into one flat buffer (an undefined gradient counts as zeros).
    for (size_t k = 0; k < part.params.size(); ++k) {
      const size_t i = part.params[k];
      Tensor dst = part.flat_grads.slice(0, part.offset[k], part.offset[k] + params[i].numel());
      if (grads[i].defined()) {
        SPORE_CHECK(grads[i].numel() == params[i].numel(), "[", name(), "] gradient ", i, " has ",
                    grads[i].numel(), " elements, its parameter ", params[i].numel());
        assign(dst, grads[i].reshape({-1}));
      } else {
        assign(dst, scalar_tensor(0.0, dst.dtype()));
      }
    }
    // 2. Every rank's sum (or mean) of its own range; already-reduced gradients: its own range.
    if (reduced_) {
      const int64_t at = part.per_rank * part.group->rank();
      assign(part.my_grads, part.flat_grads.slice(0, at, at + part.per_rank));
    } else {
      part.group->reduce_scatter(part.flat_grads, part.my_grads,
                                 mean_ ? ReduceOp::Mean : ReduceOp::Sum);
    }
  }
  // 3. The update of this rank's ranges, in place in the parameters (the shard tensors are views).
  if (shard_) shard_->step(shard_grads_);
  // 4. Every rank's updated range to every rank of the part's group.
  for (Part& part : parts_) {
    for (size_t j = 0; j < part.shard_param.size(); ++j) {
      const int64_t a = std::max(part.begin, part.offset[part.shard_param[j]]) - part.begin;
      assign(part.my_params.slice(0, a, a + part.shard_views[j].numel()), part.shard_views[j]);
    }
    part.group->all_gather(part.my_params, part.flat_params);
    for (size_t k = 0; k < part.params.size(); ++k) {
      const size_t i = part.params[k];
      assign(params[i],
             part.flat_params.slice(0, part.offset[k], part.offset[k] + params[i].numel())
                 .view(params[i].shape()));
    }
  }
  set_global_step(global_step() + 1);
}

std::vector<std::pair<std::string, Tensor>> ShardedOptimizer::state() const {
  return shard_ ? shard_->state() : std::vector<std::pair<std::string, Tensor>>{};
}

std::string ShardedOptimizer::shard_range() const {
  if (parts_.size() == 1)
    return std::to_string(parts_[0].begin) + ":" + std::to_string(parts_[0].end);
  std::string s;
  for (const Part& p : parts_)
    s += (s.empty() ? "" : ",") + std::to_string(p.begin) + ":" + std::to_string(p.end) + "/" +
         std::to_string(p.group->size());
  return s;
}

std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> ShardedOptimizer::state_ranges()
    const {
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> out;
  for (const Part& p : parts_)
    for (size_t j = 0; j < p.shard_param.size(); ++j) {
      const size_t k = p.shard_param[j];
      const int64_t a = std::max(p.begin, p.offset[k]) - p.offset[k];
      out.push_back({inner_->parameter_names()[p.params[k]], {a, a + p.shard_views[j].numel()}});
    }
  return out;
}

size_t ShardedOptimizer::state_bytes() const { return shard_ ? optimizer_state_bytes(*shard_) : 0; }

size_t optimizer_state_bytes(const optim::Optimizer& opt) {
  if (const auto* s = dynamic_cast<const ShardedOptimizer*>(&opt)) return s->state_bytes();
  size_t bytes = 0;
  for (const auto& [name, t] : opt.state()) bytes += size_t(t.numel()) * itemsize(t.dtype());
  return bytes;
}

}  // namespace spore::parallel
