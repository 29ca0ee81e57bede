// The concrete optimizers, with MindSpore's names, defaults and update rules:
//   SGD              (nn.SGD)              momentum, dampening, weight_decay, nesterov
//   Momentum         (nn.Momentum)         accum = m * accum + g;  p -= lr * accum (or nesterov)
//   Adam             (nn.Adam)             bias-corrected moments; weight_decay is L2 (added to g)
//   AdamWeightDecay  (nn.AdamWeightDecay)  moments without bias correction; decay decoupled
//   RMSProp          (nn.RMSProp)          ms = decay * ms + (1 - decay) g^2; eps inside the sqrt
//   Adagrad          (nn.Adagrad)          accum += g^2; p -= lr * g / sqrt(accum)
//   Lamb             (nn.Lamb)             Adam's bias-corrected step scaled by a layer-wise trust
//   ratio
// Each takes a parameter list (one group) or ParamGroups (per-group lr / weight decay). The
// updates run through the in-place primitives ApplyMomentum / ApplyAdam / ApplyRMSProp; Adagrad's
// and Lamb's are elementwise ops and norms that read their per-step scalars from the hyper tensor
// while tracing (so Graph mode compiles one step for every lr and step too).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spore/optim/lr.h"
#include "spore/optim/optimizer.h"

namespace spore::optim {

struct SGDOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
  double loss_scale = 1;
};
// buf = g on the first step, then buf = momentum * buf + (1 - dampening) * g; p -= lr * buf
// (nesterov: p -= lr * (g + momentum * buf)). g includes weight_decay * p.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, LearningRate lr = 0.1, SGDOptions opts = {});
  SGD(std::vector<ParamGroup> groups, LearningRate lr = 0.1, SGDOptions opts = {});
  std::string name() const override { return "SGD"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::optional<double> momentum() const override { return opts_.momentum; }
  // Needs momentum > 0 at construction (the state exists only then).
  void set_momentum(double m) override;
  std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const override;

 protected:
  void free_state() override;
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;
  // [lr, momentum] for ApplyMomentum; none when the update is elementwise ops (no momentum,
  // dampening).
  size_t hyper_size() const override { return opts_.momentum > 0 && opts_.dampening == 0 ? 2 : 0; }
  bool gates_updates() const override { return hyper_size() > 0; }  // ApplyMomentum only then
  void hyper_values(double lr, double* out) const override;

 private:
  SGDOptions opts_;
  std::vector<Tensor> accum_;
  std::vector<bool> started_;  // per parameter: first step done (dampening applies after it)
};

struct MomentumOptions {
  double weight_decay = 0;
  bool nesterov = false;
  double loss_scale = 1;
};
// MindSpore's Momentum: g = grad + weight_decay * p; accum = momentum * accum + g;
// p -= lr * accum, or with nesterov p -= lr * (g + momentum * accum).
class Momentum : public Optimizer {
 public:
  Momentum(std::vector<Tensor> params, LearningRate lr, double momentum, MomentumOptions opts = {});
  Momentum(std::vector<ParamGroup> groups, LearningRate lr, double momentum,
           MomentumOptions opts = {});
  std::string name() const override { return "Momentum"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::optional<double> momentum() const override { return momentum_; }
  void set_momentum(double m) override;
  std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const override;

 protected:
  void free_state() override;
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;
  size_t hyper_size() const override { return 2; }  // ApplyMomentum's [lr, momentum]
  bool gates_updates() const override { return true; }
  void hyper_values(double lr, double* out) const override;

 private:
  double momentum_;
  MomentumOptions opts_;
  std::vector<Tensor> moments_;
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient (Adam); decoupled (AdamWeightDecay)
  double loss_scale = 1;
};
// Adam at step t (1-based): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), g including weight_decay * p.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, LearningRate lr = 1e-3, AdamOptions opts = {});
  Adam(std::vector<ParamGroup> groups, LearningRate lr = 1e-3, AdamOptions opts = {});
  std::string name() const override { return "Adam"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const override;

 protected:
  void free_state() override;
  Adam(std::vector<ParamGroup> groups, LearningRate lr, AdamOptions opts, bool decoupled);
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;
  size_t hyper_size() const override { return 3; }  // ApplyAdam's [lr, step, eps]
  bool hyper_depends_on_step() const override { return !decoupled_; }  // Adam's step t
  bool gates_updates() const override { return true; }
  void hyper_values(double lr, double* out) const override;
  AdamOptions opts_;
  bool decoupled_ = false;
  std::vector<Tensor> m_, v_;
};

// MindSpore's AdamWeightDecay (AdamW): m, v as Adam but without bias correction;
// p -= lr * (m / (sqrt(v) + eps) + weight_decay * p). Defaults eps 1e-6, weight_decay 0.
struct AdamWeightDecayOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0;
  double loss_scale = 1;
};
class AdamWeightDecay : public Adam {
 public:
  AdamWeightDecay(std::vector<Tensor> params, LearningRate lr = 1e-3,
                  AdamWeightDecayOptions opts = {});
  AdamWeightDecay(std::vector<ParamGroup> groups, LearningRate lr = 1e-3,
                  AdamWeightDecayOptions opts = {});
  std::string name() const override { return "AdamWeightDecay"; }
  std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const override;
};
using AdamW = AdamWeightDecay;

struct RMSPropOptions {
  double decay = 0.9;
  double momentum = 0;
  double epsilon = 1e-10;
  double weight_decay = 0;  // L2, added to the gradient
  double loss_scale = 1;
};
// ms = decay * ms + (1 - decay) * g^2; mom = momentum * mom + lr * g / sqrt(ms + eps); p -= mom.
class RMSProp : public Optimizer {
 public:
  RMSProp(std::vector<Tensor> params, LearningRate lr = 0.1, RMSPropOptions opts = {});
  RMSProp(std::vector<ParamGroup> groups, LearningRate lr = 0.1, RMSPropOptions opts = {});
  std::string name() const override { return "RMSProp"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const override;

 protected:
  void free_state() override;
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;
  size_t hyper_size() const override { return 1; }  // ApplyRMSProp's [lr]
  bool gates_updates() const override { return true; }

 private:
  RMSPropOptions opts_;
  std::vector<Tensor> ms_, mom_;
};

struct AdagradOptions {
  double accum = 0.1;        // the accumulator's initial value (MindSpore's default)
  bool update_slots = true;  // false: the accumulator stays at its initial value
  double weight_decay = 0;   // L2, added to the gradient
  double loss_scale = 1;
};
// MindSpore's Adagrad (ApplyAdagrad): g = grad + weight_decay * p; accum += g^2 (update_slots);
// p -= lr * g / sqrt(accum). No epsilon: accum starts above zero (accum > 0 is required when
// update_slots is false).
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, LearningRate lr = 1e-3, AdagradOptions opts = {});
  Adagrad(std::vector<ParamGroup> groups, LearningRate lr = 1e-3, AdagradOptions opts = {});
  std::string name() const override { return "Adagrad"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  std::shared_ptr<Optimizer> rebuild(std::vector<ParamGroup> groups) const override;

 protected:
  void free_state() override;
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;
  size_t hyper_size() const override { return 1; }  // [lr]

 private:
  AdagradOptions opts_;
  std::vector<Tensor> accum_;
};

struct LambOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0;
  // The weight decay inside the trust ratio's norm (g_norm_hat below). MindSpore without
  // parameter groups puts its one weight_decay there for every parameter, also for those its
  // decay filter leaves undecayed (names with "beta" / "gamma"); set it to that value to match.
  // Unset: each parameter's own weight decay.
  std::optional<double> trust_ratio_weight_decay{};
};
// MindSpore's Lamb at step t (1-based), computed in float32 at least:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m^ = m / (1 - b1^t);  v^ = v / (1 - b2^t)
//   update = m^ / (sqrt(v^) + eps) + wd * p
//   g_norm_hat = || m^ * rsqrt(v^ + eps) + wd' * p ||        (wd': trust_ratio_weight_decay)
//   trust = ||p|| > 0 and ||g|| > 0 ? ||p|| / g_norm_hat : 1, clipped to [0, 10]
//   p -= lr * trust * update
// The norms are over each whole parameter, so Lamb cannot be sharded (rebuild() is nullptr).
class Lamb : public Optimizer {
 public:
  Lamb(std::vector<Tensor> params, LearningRate lr, LambOptions opts = {});
  Lamb(std::vector<ParamGroup> groups, LearningRate lr, LambOptions opts = {});
  std::string name() const override { return "Lamb"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;

 protected:
  void free_state() override;
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;
  size_t hyper_size() const override { return 3; }              // [lr, 1 - beta1^t, 1 - beta2^t]
  bool hyper_depends_on_step() const override { return true; }  // 1 - beta^t
  void hyper_values(double lr, double* out) const override;

 private:
  LambOptions opts_;
  std::vector<Tensor> m_, v_;
};

}  // namespace spore::optim
