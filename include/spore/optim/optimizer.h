// Optimizers (MindSpore's nn.Optimizer family). An optimizer owns its parameters' state and
// updates the parameters in place: step(grads) takes one gradient per parameter, in the order of
// parameters(). Learning rates may be constant, a per-step list or a schedule (optim/lr.h).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore::optim {

// A learning rate as a function of the global step (0-based).
using LrSchedule = std::function<double(int64_t step)>;

struct LearningRate {
  LearningRate(double v) : fn([v](int64_t) { return v; }) {}  // NOLINT
  LearningRate(std::vector<double> per_step);                   // NOLINT: last value repeats
  LearningRate(LrSchedule f) : fn(std::move(f)) {}              // NOLINT
  double at(int64_t step) const { return fn(step); }
  LrSchedule fn;
};

// A parameter group: its own weight decay / learning rate (MindSpore's group_params).
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> weight_decay;
  std::optional<LearningRate> lr;
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, LearningRate lr, double weight_decay);
  virtual ~Optimizer() = default;
  // Applies one update with grads[i] for parameters()[i]; advances the global step.
  void step(const std::vector<Tensor>& grads);
  const std::vector<Tensor>& parameters() const { return params_; }
  int64_t global_step() const { return step_; }
  double current_lr() const;  // lr of the first group at the current step
  // State tensors (moments...) with names, for checkpoints: "moments.conv1.weight".
  virtual std::vector<std::pair<std::string, Tensor>> state() const { return {}; }
  // Optional global-norm clipping applied inside step() (0 = off).
  void set_clip_grad_norm(double max_norm) { clip_norm_ = max_norm; }

 protected:
  // Updates parameter i in place with its (already decayed/clipped?) gradient at learning rate lr.
  virtual void update(size_t i, const Tensor& grad, double lr, double weight_decay) = 0;
  std::vector<Tensor> params_;
  std::vector<double> weight_decays_;
  std::vector<LearningRate> lrs_;
  int64_t step_ = 0;
  double clip_norm_ = 0;
};

using OptimizerPtr = std::shared_ptr<Optimizer>;

}  // namespace spore::optim
