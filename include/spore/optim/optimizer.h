// Optimizers (MindSpore's nn.Optimizer family). An optimizer owns its parameters' state and
// updates the parameters in place: step(grads) takes one gradient per parameter, in the order of
// parameters(). Learning rates may be constant, a per-step list or a schedule (optim/lr.h).
// Concrete optimizers (SGD, Momentum, Adam, AdamWeightDecay, RMSProp) are in optim/optimizers.h.
// To add one: derive from Optimizer, allocate state in the constructor, implement update().
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spore/tensor.h"

namespace spore::optim {

// A learning rate as a function of the global step (0-based).
using LrSchedule = std::function<double(int64_t step)>;

struct LearningRate {
  LearningRate(double v) : fn([v](int64_t) { return v; }) {}  // NOLINT
  LearningRate(std::vector<double> per_step);                 // NOLINT: last value repeats
  LearningRate(LrSchedule f) : fn(std::move(f)) {}            // NOLINT
  double at(int64_t step) const { return fn(step); }
  LrSchedule fn;
};

// A parameter group: its own weight decay / learning rate (MindSpore's group_params).
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> weight_decay;
  std::optional<LearningRate> lr;
  std::vector<std::string> names;  // optional, one per param: names the state ("moments.<name>")
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, LearningRate lr, double weight_decay);
  virtual ~Optimizer() = default;
  // Applies one update with grads[i] for parameters()[i]; advances the global step.
  // An undefined gradient leaves its parameter (and state) untouched.
  void step(const std::vector<Tensor>& grads);
  const std::vector<Tensor>& parameters() const { return params_; }
  const std::vector<std::string>& parameter_names() const { return names_; }
  int64_t global_step() const { return step_; }
  void set_global_step(int64_t s) { step_ = s; }  // resuming from a checkpoint
  double current_lr() const;                      // lr of the first group at the current step
  double lr_of(size_t i) const { return lrs_[i].at(step_); }  // parameter i, current step
  // State tensors (moments...) with names, for checkpoints: "moments.conv1.weight".
  virtual std::vector<std::pair<std::string, Tensor>> state() const { return {}; }
  // Optional global-norm clipping applied inside step() (0 = off).
  void set_clip_grad_norm(double max_norm) { clip_norm_ = max_norm; }
  // Gradients are multiplied by 1/loss_scale before anything else (MindSpore's loss_scale).
  // Deliberate difference: MindSpore adds weight decay before unscaling, which divides the decay
  // by loss_scale too; Spore unscales first, so weight_decay means the same at any loss scale.
  void set_loss_scale(double s);
  double loss_scale() const { return loss_scale_; }
  virtual std::string name() const = 0;  // "Momentum", "Adam", ...

 protected:
  // Updates parameter i in place with its (unscaled, clipped) gradient at learning rate lr; weight
  // decay (0 for a no-decay group) is applied by the implementation, as its algorithm defines.
  virtual void update(size_t i, const Tensor& grad, double lr, double weight_decay) = 0;
  // One zero tensor per parameter: a state slot.
  std::vector<Tensor> zeros_like_params() const;
  // ("<prefix>.<name>", state[i]) for every parameter.
  void append_state(std::vector<std::pair<std::string, Tensor>>& out, const std::string& prefix,
                    const std::vector<Tensor>& slots) const;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<double> weight_decays_;
  std::vector<LearningRate> lrs_;
  int64_t step_ = 0;
  double clip_norm_ = 0;
  double loss_scale_ = 1;
};

using OptimizerPtr = std::shared_ptr<Optimizer>;

// One group holding all of params (the optimizer's default lr and weight decay).
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

// Two groups: names ending in "bias", "beta" or "gamma" (biases, norm shifts and scales) get
// weight_decay 0; everything else keeps the optimizer's default. Either group may be empty.
std::vector<ParamGroup> split_decay_groups(
    const std::vector<std::pair<std::string, Tensor>>& named_params);

// sqrt(sum over all gradients of sum(g^2)); undefined gradients are skipped.
double global_norm(const std::vector<Tensor>& grads);
// Scales every gradient by max_norm / global_norm when the global norm exceeds max_norm
// (MindSpore's ops.clip_by_global_norm); otherwise returns them unchanged.
std::vector<Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double max_norm);

}  // namespace spore::optim
