// Training wrappers (MindSpore's nn.WithLossCell, nn.TrainOneStepCell, nn.WithEvalCell). Each is
// an nn::Cell that owns the cells it wraps, so parameters() still reaches the backbone's.
//   auto net = std::make_shared<LeNet5>();
//   auto with_loss = std::make_shared<train::WithLossCell>(net, loss_fn);
//   auto step = std::make_shared<train::TrainOneStepCell>(with_loss, opt);
//   Tensor loss = (*step)(images, labels);   // one optimizer step
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "spore/amp.h"
#include "spore/jit.h"
#include "spore/nn/cell.h"
#include "spore/optim/optimizer.h"

namespace spore::train {

// loss_fn(backbone(data), label). Loss cells take (logits, labels) through construct(x, y).
class WithLossCell : public nn::Cell {
 public:
  WithLossCell(nn::CellPtr backbone, nn::CellPtr loss_fn);
  Tensor construct(const Tensor& data, const Tensor& label) override;
  // Inputs beyond two: backbone gets all but the last, the loss gets (output, last).
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  const nn::CellPtr& backbone_network() const { return backbone_; }
  const nn::CellPtr& loss_fn() const { return loss_fn_; }

 private:
  nn::CellPtr backbone_, loss_fn_;
};

// Maps the gradients before the optimizer sees them: identity when alone, all-reduce-mean in
// data-parallel training (parallel/ plugs its reducer in here).
using GradReducer = std::function<std::vector<Tensor>(std::vector<Tensor>)>;

// How accumulated micro-batch gradients combine (TrainOneStepCell::set_grad_accumulation).
//   kMean: each micro-batch's gradients times 1/k (MindSpore's gradient_accumulation_steps): with
//          a mean loss, k micro-batches of b rows train as one batch of k*b rows.
//   kSum:  summed (PyTorch's repeated backward() into .grad, as YOLOv5 does with a loss that is
//          already times the batch size). The count is not part of the compiled step, so it may
//          change between any two calls (a warm-up ramp) without recompiling.
enum class GradAccumulation { kMean, kSum };

// One training step: outputs = network(inputs), the first one the loss (the others, if any, are
// auxiliary values such as loss components: PyTorch's has_aux; they are not differentiated);
// grads = d loss / d optimizer->parameters() with the output gradient filled with `sens`;
// grads = reducer(grads); optimizer->step(grads). Returns {loss, aux...} without history.
// sens != 1 scales every gradient by sens (loss scaling).
class TrainOneStepCell : public nn::Cell {
 public:
  TrainOneStepCell(nn::CellPtr network, optim::OptimizerPtr optimizer, double sens = 1.0);
  Tensor construct(const Tensor& data, const Tensor& label) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

  void set_grad_reducer(GradReducer reducer) { reducer_ = std::move(reducer); }
  const GradReducer& grad_reducer() const { return reducer_; }
  // Called during backward with (parameter index, gradient) once that gradient is final (the
  // data-parallel reducer starts its all-reduce buckets from here, overlapping backward).
  using GradReadyHook = std::function<void(size_t, const Tensor&)>;
  void set_grad_ready_hook(GradReadyHook hook) { grad_ready_ = std::move(hook); }
  const GradReadyHook& grad_ready_hook() const { return grad_ready_; }
  void set_sens(double sens) { sens_ = sens; }
  double sens() const { return sens_; }
  // Gradient accumulation (MindSpore's gradient_accumulation_steps): each call is one micro-batch;
  // its gradients (times 1/k in kMean mode) are summed in float buffers, and the call that makes
  // k micro-batches since the last update adds its own, runs the reducer and the optimizer on the
  // sum and clears the buffers. Graph mode compiles two graphs (accumulate, and accumulate +
  // update), each once. k = 1 in kMean mode (default): every call updates, no buffers. kMean's k
  // changes only between updates (it is in the graph); kSum's at any time (see GradAccumulation).
  void set_grad_accumulation(int64_t k, GradAccumulation mode = GradAccumulation::kMean);
  int64_t grad_accumulation() const { return accum_steps_; }
  GradAccumulation grad_accumulation_mode() const { return accum_mode_; }
  // Micro-batches accumulated since the last update (0 .. k-1).
  int64_t micro_step() const { return micro_; }
  const nn::CellPtr& network() const { return network_; }
  const optim::OptimizerPtr& optimizer() const { return optimizer_; }
  // The gradients of the last step, after the reducer (for inspection and tests).
  // (Empty after a micro-step that only accumulated.)
  const std::vector<Tensor>& last_grads() const { return last_grads_; }
  // The network's outputs after the loss in the last call (detached; empty when it returns the
  // loss alone): what Model hands callbacks as RunContext::aux.
  const std::vector<Tensor>& last_aux() const { return last_aux_; }
  // Graph mode: the compiled step's statistics (planned peak, nodes before / after the passes,
  // cache hits); all zero before the first compiled step.
  virtual JitStats jit_stats() const;

 private:
  // The step itself (PyNative, and the body Graph mode traces): apply = false only accumulates.
  std::vector<Tensor> step_eager(const std::vector<Tensor>& inputs, bool apply);

 protected:
  // The accumulation buffers' scale for one micro-batch (1/k or 1).
  double accumulation_scale() const;
  nn::CellPtr network_;
  optim::OptimizerPtr optimizer_;
  double sens_;
  GradReducer reducer_;
  GradReadyHook grad_ready_;
  std::vector<Tensor> last_grads_, last_aux_;
  int64_t accum_steps_ = 1, micro_ = 0;
  GradAccumulation accum_mode_ = GradAccumulation::kMean;
  std::vector<Tensor> accum_;       // one buffer per parameter (its dtype) while accumulating
  bool tracing_own_step_ = false;   // inside compiled_ / compiled_acc_'s trace
  std::shared_ptr<void> compiled_;  // Graph mode: the jit'ed step (src/graph), built on first use
  std::shared_ptr<void> compiled_acc_;  // ... and the accumulate-only step (accum_steps_ > 1)
};

// TrainOneStepCell with loss scaling (MindSpore's nn.TrainOneStepWithLossScaleCell): the loss
// gradient is seeded with the manager's scale; the gradients are unscaled (times 1/scale in
// float32), checked with one AllFinite over all of them, and the optimizer step is skipped when
// one is inf/nan and the manager drops overflowed steps; then the manager updates the scale.
// forward() returns {loss, overflow (bool scalar), scale (float32 scalar, the one this step used),
// aux...}. With gradient accumulation, an overflowed micro-batch's gradients are left out of the
// sum (the batch is skipped), and an update needs at least one clean micro-batch (else the next
// call tries again), as YOLOv5's loop with torch's GradScaler does.
// Graph mode, with an optimizer whose updates can be gated (Momentum, SGD with momentum, Adam,
// AdamWeightDecay, RMSProp: Optimizer::gates_updates) and a Fixed or Dynamic manager, without
// accumulation or a grad reducer: the WHOLE step is one compiled graph deciding on the device:
// gradients, the finiteness check, the optimizer update gated by it (skipped in the kernels when
// it is false), and the scale update (the manager's rule, in float64, on a device copy of its
// scale and clean-step count). The host books each outcome later: when the step has run, or when
// something needs it: the next step if its hyper values (learning rate, Adam's step) depend on
// how many steps applied, the optimizer's global_step(), the manager's get_loss_scale(), this
// cell's loss_scale() / last_overflow() / overflow_steps(). On a GPU each flag's copy to
// page-locked memory is queued behind its step, so a read waits for that step only, never for the
// steps queued after it. unscaled_grads() is empty (the gradients stay inside the graph).
// Otherwise: forward, backward, unscaling and the finiteness check run as one compiled graph (the
// scale is a graph input, so a new scale does not recompile) returning {loss, all_finite, unscaled
// grads...}; the host then reads the flag and runs the optimizer step only when clean.
class TrainOneStepWithLossScaleCell : public TrainOneStepCell {
 public:
  TrainOneStepWithLossScaleCell(nn::CellPtr network, optim::OptimizerPtr optimizer,
                                amp::LossScaleManagerPtr manager);
  // A constant scale that still skips overflowed steps (MindSpore's scale_sense tensor).
  TrainOneStepWithLossScaleCell(nn::CellPtr network, optim::OptimizerPtr optimizer,
                                double scale_sense);
  Tensor construct(const Tensor& data, const Tensor& label) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

  const amp::LossScaleManagerPtr& loss_scale_manager() const { return manager_; }
  double loss_scale() const;       // for the next step
  bool last_overflow() const;      // whether the last step overflowed
  int64_t overflow_steps() const;  // overflowed steps so far
  // The unscaled gradients of the last step (inf/nan when it overflowed); empty when the step
  // decided on the device.
  const std::vector<Tensor>& unscaled_grads() const { return grads_; }
  JitStats jit_stats() const override;
  // Whether the next call would run the step deciding on the device (see above).
  bool decides_on_device() const;
  // false: the host decides even where the device could (A/B measurements, debugging).
  void set_decide_on_device(bool on) { device_decides_ = on; }
  // Steps the device decided whose outcome the host has not booked yet (at most 4: a fifth step
  // waits for the oldest). A step that has run is booked when the next one starts; with
  // set_eager_booking(false) only when something needs it (the hyper values changing, the step
  // count, the scale), which is what steps still queued on a GPU look like: tests use it.
  int64_t unbooked_steps() const;
  void set_eager_booking(bool eager);

  struct Book;  // the outcomes: booked steps, and the one the device has not reported yet

 private:
  // {loss, all_finite, unscaled grads..., aux...} for inputs (data..., label) and a float32 scale.
  std::vector<Tensor> scaled_grads(const std::vector<Tensor>& inputs, const Tensor& scale);
  std::vector<Tensor> forward_on_device(const std::vector<Tensor>& inputs);
  std::vector<Tensor> device_step(const std::vector<Tensor>& inputs);  // its traced body
  amp::LossScaleManagerPtr manager_;
  std::shared_ptr<Book> book_;
  bool device_decides_ = true;    // set_decide_on_device
  bool has_clean_micro_ = false;  // accumulation: some micro-batch since the update was finite
  std::vector<Tensor> grads_;
  std::shared_ptr<void> compiled_ls_;   // Graph mode: the jit'ed forward + backward
  std::shared_ptr<void> compiled_dev_;  // Graph mode: the whole step deciding on the device
  // The scale as the compiled step's input on a device: uploaded in place when it changes.
  Tensor device_scale_;
  double device_scale_value_ = 0;
};

// Evaluation: forward({data, label}) returns {loss, outputs, label} for the metrics.
// construct(data, label) returns the loss alone.
class WithEvalCell : public nn::Cell {
 public:
  WithEvalCell(nn::CellPtr network, nn::CellPtr loss_fn);
  Tensor construct(const Tensor& data, const Tensor& label) override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  const nn::CellPtr& network() const { return network_; }

 private:
  nn::CellPtr network_, loss_fn_;
};

// A loss written as a function, as a Cell: LossFn([](auto& logits, auto& y) { return ...; }).
class LossFn : public nn::Cell {
 public:
  using Fn = std::function<Tensor(const Tensor& logits, const Tensor& labels)>;
  explicit LossFn(Fn fn);
  Tensor construct(const Tensor& logits, const Tensor& labels) override {
    return fn_(logits, labels);
  }

 private:
  Fn fn_;
};

}  // namespace spore::train
