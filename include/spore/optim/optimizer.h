// Optimizers (MindSpore's nn.Optimizer family). An optimizer owns its parameters' state and
// updates the parameters in place: step(grads) takes one gradient per parameter, in the order of
// parameters(). Learning rates may be constant, a per-step list or a schedule (optim/lr.h).
// Concrete optimizers (SGD, Momentum, Adam, AdamWeightDecay, RMSProp) are in optim/optimizers.h.
// To add one: derive from Optimizer, allocate state in the constructor, implement update().
//
// Graph mode: the per-step scalars of an update (the learning rate; Adam's step and eps) are not
// traced in as attributes but read at run time from one float64 "hyper" tensor per parameter group
// (its learning rate, and Momentum's / SGD's momentum), captured by the traced graph; so one
// compiled TrainOneStepCell step serves a whole schedule, and set_group_lr() / set_momentum()
// during training (PyTorch's param_groups[g]['lr'] = v) recompile nothing. write_hyper() fills
// them each step.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spore/pending.h"
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
  virtual void step(const std::vector<Tensor>& grads);
  // False when step() communicates (the sharded optimizer of parallel/): a training step holding
  // such an optimizer runs eagerly instead of as one compiled graph.
  virtual bool traceable() const { return true; }
  // The same kind of optimizer with the same options over other parameters, each group carrying
  // its own lr and weight decay (optimizer sharding builds one over each rank's slices); nullptr
  // when the optimizer cannot be rebuilt (a custom one that does not override this).
  virtual std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const {
    (void)groups;
    return nullptr;
  }
  // Frees the state (moments...) once another optimizer has taken over the update (the sharded
  // one); step() is then an error naming the optimizer that replaced it.
  void release_state(const std::string& replaced_by);
  const LearningRate& lr_schedule(size_t i) const { return lrs_[i]; }
  // Parameter groups, in the order given to the constructor (a parameter list is one group).
  size_t num_groups() const { return group_lrs_.size(); }
  // Group g's learning rate at the current step; set_group_lr replaces its schedule by the
  // constant lr (PyTorch's param_groups[g]['lr'] = lr; warm-up and per-epoch schedules).
  double group_lr(size_t g) const;
  void set_group_lr(size_t g, double lr);
  // The group's schedule itself (a warm-up overrides a step's lr and puts the schedule back).
  const LearningRate& group_lr_schedule(size_t g) const;
  void set_group_lr(size_t g, LearningRate lr);
  // The momentum coefficient, for optimizers that have one (Momentum, SGD with momentum); set
  // between steps (warm-up) it is read by the compiled step at run time. Others: nullopt / error.
  virtual std::optional<double> momentum() const { return std::nullopt; }
  virtual void set_momentum(double m);
  double weight_decay_of(size_t i) const { return weight_decays_[i]; }
  double clip_grad_norm() const { return clip_norm_; }
  const std::vector<Tensor>& parameters() const { return params_; }
  const std::vector<std::string>& parameter_names() const { return names_; }
  int64_t global_step() const {
    settle();
    return step_;
  }
  void set_global_step(int64_t s) {  // resuming from a checkpoint
    settle();
    step_ = s;
  }
  double current_lr() const;      // lr of the first group at the current step
  double lr_of(size_t i) const {  // parameter i, current step
    settle();
    return lrs_[i].at(step_);
  }
  // A step whose outcome (applied or skipped) the device decides and the host learns later (the
  // loss-scaled step, train/wrappers.cpp) leaves `settle` here: whatever reads the step count
  // first calls it (once), and it sets the count. Null: nothing pending.
  void set_pending_step(std::function<void()> settle) { pending_.set(std::move(settle)); }
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
  // Whether the updates take their per-step scalars from the hyper tensors while tracing (one
  // compiled graph for every lr and step). False (SGD without momentum or with dampening, whose
  // updates are elementwise ops): the lr is traced in, so callers must key the graph on it.
  bool takes_hyper() const { return hyper_size() > 0; }
  // Fills the hyper tensors with the values of the current step (lr_of(i) at global_step(), and
  // for Adam step + 1 and the corrected eps); a compiled step calls it before every run. step()
  // calls it too while tracing, so a traced graph starts with the traced step's values.
  void write_hyper();
  // The hyper tensors (one per lr schedule: the default, then each group with its own lr), each
  // float64 (k); empty until the first write_hyper().
  const std::vector<Tensor>& hyper_tensors() const { return hyper_; }
  // Whether the hyper values are the same at the step counts global_step() .. + n (a constant
  // learning rate over them, and no scalar that depends on the count, as Adam's bias correction
  // does): then a step may be queued while the outcome of the n steps before it is unknown.
  bool hyper_constant_for(int64_t n) const;
  // Whether update() makes every change through an update primitive reading the hyper input,
  // so that a gate appended to that input can skip the whole update on the device (the loss-scaled
  // step deciding on overflow without the host: train/wrappers.cpp). False for updates written
  // with elementwise ops and assign (SGD with dampening, Adagrad, Lamb, custom optimizers).
  virtual bool gates_updates() const { return false; }
  // While tracing: the updates traced until it is cleared (an undefined tensor) run only when
  // `apply` (a bool scalar on the parameters' device) is true at run time: their hyper input
  // gets `apply` as one more element and the primitives attr gated=true.
  void set_update_gate(Tensor apply);

 protected:
  // Updates parameter i in place with its (unscaled, clipped) gradient at learning rate lr; weight
  // decay (0 for a no-decay group) is applied by the implementation, as its algorithm defines.
  virtual void update(size_t i, const Tensor& grad, double lr, double weight_decay) = 0;
  // Scalars per hyper tensor (ops.def's order for the optimizer's primitive); 0: no hyper input.
  virtual size_t hyper_size() const { return 0; }
  // The hyper values for learning rate lr at the current step_ (hyper_size() of them).
  virtual void hyper_values(double lr, double* out) const { out[0] = lr; }
  // Whether hyper_values depends on the step count besides the learning rate (Adam's step).
  virtual bool hyper_depends_on_step() const { return false; }
  // Parameter i's hyper tensor while tracing (pass it with attr hyper_input=true), else undefined
  // (PyNative: the values go as attributes, exactly as before).
  Tensor hyper_for(size_t i) const;
  // Whether the updates being traced are gated (set_update_gate): pass attr gated=true with
  // hyper_for(i) then.
  bool gated() const { return gate_.defined(); }
  // Drops the state tensors (release_state()).
  virtual void free_state() {}
  // The default schedule, for rebuild().
  const LearningRate& default_lr() const { return default_lr_; }
  // One zero tensor per parameter: a state slot.
  std::vector<Tensor> zeros_like_params() const;
  // ("<prefix>.<name>", state[i]) for every parameter.
  void append_state(std::vector<std::pair<std::string, Tensor>>& out, const std::string& prefix,
                    const std::vector<Tensor>& slots) const;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<double> weight_decays_;
  std::vector<LearningRate> lrs_;
  LearningRate default_lr_;
  std::vector<LearningRate> group_lrs_;          // per group: its schedule
  std::vector<size_t> group_of_;                 // per parameter: its group
  std::vector<size_t> hyper_slot_;               // per parameter: its group's hyper tensor
  std::vector<size_t> slot_group_;               // per hyper tensor: the group it serves
  mutable std::vector<Tensor> hyper_;            // float64 (hyper_size()) each; made on first use
  std::vector<std::vector<double>> hyper_host_;  // what each holds now (skips unchanged uploads)
  Tensor gate_;                                  // set_update_gate: float64 (1), traced
  mutable std::vector<Tensor> gated_hyper_;      // per hyper tensor: it with the gate appended
  PendingAction pending_;                        // set_pending_step
  void settle() const { pending_.run(); }
  int64_t step_ = 0;
  double clip_norm_ = 0;
  double loss_scale_ = 1;
  std::string replaced_by_;  // set by release_state()
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
// (MindSpore's ops.clip_by_global_norm); otherwise returns them unchanged. While tracing (Graph
// mode) the norm stays a tensor and the choice is a select, so the compiled step clips too.
std::vector<Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double max_norm);

}  // namespace spore::optim
