// Training callbacks (mindspore.train.Callback family). Model::train / eval / fit call every
// callback's hooks in list order with one shared RunContext:
//   on_train_begin, then per epoch: on_epoch_begin, (on_step_begin, on_step_end) per step,
//   [validation in fit: on_eval_begin, (on_eval_step_begin, on_eval_step_end)..., on_eval_end],
//   on_epoch_end; finally on_train_end. ctx.request_stop() ends training after the current step.
// Callbacks go in a list by value or shared_ptr (keep a shared_ptr to read one afterwards):
//   auto history = std::make_shared<train::History>();
//   model.train(5, ds, {train::LossMonitor(100), train::ProgressBar(), history});
// To write one: derive from Callback and override the hooks you need (or use LambdaCallback).
#pragma once
#include <concepts>
#include <deque>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/optim/optimizer.h"

namespace spore::train {

class Model;

struct RunContext {
  int64_t epoch = 0;            // current epoch, 1-based (MindSpore's cur_epoch_num)
  int64_t epoch_num = 0;        // the last epoch of this run
  int64_t step = 0;             // step within the epoch, 1-based
  int64_t steps_per_epoch = 0;  // the dataset's size in batches (batch_num)
  int64_t global_step = 0;  // steps since the start, counting skipped initial epochs (cur_step_num)
  int64_t batch_size = 0;   // samples in the current batch
  int64_t epoch_samples = 0;                                     // samples seen so far this epoch
  double loss = std::numeric_limits<double>::quiet_NaN();        // last step's loss
  double epoch_loss = std::numeric_limits<double>::quiet_NaN();  // mean step loss this epoch
  double lr = 0;             // learning rate used by the last step (in a sink: by its first step)
  double elapsed = 0;        // seconds since on_train_begin
  double epoch_elapsed = 0;  // seconds since on_epoch_begin
  double step_time = 0;      // seconds of the last step
  // This epoch's training (its evaluation excluded), set before on_epoch_end: wall seconds from
  // the epoch's start to its last step's end; seconds the loop waited for the next batch; seconds
  // the device sat idle between steps, on its own clock (waiting for a batch, or for the host to
  // queue the next step: on the CPU, whatever the host did between two steps).
  double epoch_train_time = 0;
  double epoch_data_wait = 0;
  double epoch_device_idle = 0;
  // The network's outputs after the loss in the last step, detached (a network returning
  // (loss, aux...): loss components and the like); empty when it returns the loss alone.
  std::vector<Tensor> aux;
  // Results of this epoch's validation (fit): the metric names, plus "eval_loss" when the model
  // has a loss function. Cleared at each epoch begin. In eval(): the results so far.
  std::map<std::string, double> metrics;
  int64_t eval_step = 0;   // step within an evaluation pass, 1-based
  int64_t eval_steps = 0;  // the evaluation dataset's size in batches
  Model* model = nullptr;
  nn::Cell* network = nullptr;  // the user's network (what a checkpoint saves)
  optim::Optimizer* optimizer = nullptr;

  void request_stop() { stop_requested = true; }
  bool stop_requested = false;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(RunContext&) {}
  virtual void on_epoch_begin(RunContext&) {}
  virtual void on_step_begin(RunContext&) {}
  virtual void on_step_end(RunContext&) {}
  virtual void on_epoch_end(RunContext&) {}
  virtual void on_train_end(RunContext&) {}
  virtual void on_eval_begin(RunContext&) {}
  virtual void on_eval_step_begin(RunContext&) {}
  virtual void on_eval_step_end(RunContext&) {}
  virtual void on_eval_end(RunContext&) {}
};
using CallbackPtr = std::shared_ptr<Callback>;

// One entry of a callback list: a callback by value (copied into a shared_ptr) or a shared_ptr.
class CallbackRef {
 public:
  template <typename C>
  requires std::derived_from<std::decay_t<C>, Callback> CallbackRef(
      C&& c)  // NOLINT: implicit, so lists read {LossMonitor(), TimeMonitor()}
      : ptr_(std::make_shared<std::decay_t<C>>(std::forward<C>(c))) {}
  template <typename C>
  requires std::derived_from<C, Callback> CallbackRef(std::shared_ptr<C> c)
      : ptr_(std::move(c)) {}  // NOLINT
  Callback* operator->() const { return ptr_.get(); }
  const CallbackPtr& get() const { return ptr_; }

 private:
  CallbackPtr ptr_;
};
using Callbacks = std::vector<CallbackRef>;

// Prints "epoch: 1 step: 100, loss is 0.2345" every per_print_times steps (to stdout by default).
// A NaN or infinite loss stops training with an error, as MindSpore's does.
class LossMonitor : public Callback {
 public:
  explicit LossMonitor(int64_t per_print_times = 1, std::ostream* out = nullptr);
  void on_step_end(RunContext& ctx) override;

 private:
  int64_t per_print_;
  std::ostream* out_;
};

// Prints "epoch time: 1234.567 ms, per step time: 12.346 ms" at each epoch end.
class TimeMonitor : public Callback {
 public:
  explicit TimeMonitor(std::ostream* out = nullptr);
  void on_epoch_end(RunContext& ctx) override;

 private:
  std::ostream* out_;
};

struct CheckpointConfig {
  int64_t save_checkpoint_steps = 1;   // every N global steps (0: off); MindSpore's default 1
  int64_t save_checkpoint_epochs = 0;  // every N epochs, at the epoch end (0: off)
  int64_t keep_checkpoint_max = 5;     // older files written by this callback are deleted
  bool save_optimizer_state = true;    // add the optimizer's state ("moments.<param>", ...)
  bool save_on_train_end = true;       // also save the last step if it was not saved
  // A run directory kept across restarts (spore train --out): keep_checkpoint_max counts the files
  // of earlier runs of this prefix too ("<prefix>_1-...", ...), oldest removed first, and
  // "<directory>/latest" names the newest file (what --resume auto reads).
  bool one_family = false;
  // More metadata for each checkpoint, asked at each save (MindSpore's append_info): what a resume
  // needs beyond tensors, e.g. the loss scale ("loss_scale", "loss_scale_good_steps").
  std::function<std::map<std::string, std::string>()> append_info;
};

// Writes "<directory>/<prefix>-<epoch>_<step>.safetensors" (step within the epoch) through
// io::save_checkpoint, with metadata epoch, step, global_step, lr. As MindSpore does, a prefix
// already used by files in the directory becomes "<prefix>_1" (then _2, ...), so runs never
// overwrite each other. Under semi_auto_parallel each rank writes its pieces under rank_<r>/;
// under pipeline_stages each rank writes its stage (Model::held_parameters and its optimizer's
// state) under rank_<r>/ with metadata pipeline_stage and pipeline_stages (spore convert --merge
// joins them). Add the callback on every rank in both cases.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string prefix = "CKP", std::string directory = "",
                           CheckpointConfig config = {});
  void on_train_begin(RunContext& ctx) override;
  void on_step_end(RunContext& ctx) override;
  void on_epoch_end(RunContext& ctx) override;
  void on_train_end(RunContext& ctx) override;
  // Files written and still kept, oldest first; the prefix actually used.
  const std::deque<std::string>& saved_files() const { return kept_; }
  const std::string& latest_checkpoint() const;  // "" before the first save
  const std::string& prefix() const { return used_prefix_; }

 private:
  void save(RunContext& ctx);
  std::string prefix_, directory_, used_prefix_;
  CheckpointConfig config_;
  std::deque<std::string> kept_;
  int64_t last_saved_step_ = -1;
};

// Stops training when `monitor` has not improved by more than min_delta for `patience` epochs.
// monitor: "loss" (the epoch's mean training loss) or a key of the validation results
// ("eval_loss", "accuracy", ...). mode "min" | "max" | "auto" (max for names containing "acc",
// "precision", "recall", "f1"; min otherwise). Epochs without validation are skipped; a monitor
// missing from a validation's results is an error naming the available keys.
struct EarlyStoppingOptions {
  std::string monitor = "eval_loss";
  int64_t patience = 0;
  double min_delta = 0;
  std::string mode = "auto";
  std::optional<double> baseline;     // must beat this to count as an improvement at all
  bool restore_best_weights = false;  // copy the best epoch's parameters back at train end
};
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions opts = {});
  EarlyStopping(std::string monitor, int64_t patience, double min_delta = 0,
                std::string mode = "auto");
  void on_train_begin(RunContext& ctx) override;
  void on_epoch_end(RunContext& ctx) override;
  void on_train_end(RunContext& ctx) override;
  int64_t stopped_epoch() const { return stopped_epoch_; }  // 0 if it never stopped training
  double best() const { return best_; }
  int64_t best_epoch() const { return best_epoch_; }

 private:
  bool improved(double v) const;
  EarlyStoppingOptions opts_;
  bool maximize_ = false;
  double best_ = 0;
  int64_t wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  std::vector<Tensor> best_weights_;
};

// Records per epoch: "loss" (mean training loss of the epoch) and each validation result.
class History : public Callback {
 public:
  void on_train_begin(RunContext& ctx) override;
  void on_epoch_end(RunContext& ctx) override;
  const std::vector<int64_t>& epochs() const { return epochs_; }
  const std::map<std::string, std::vector<double>>& history() const { return history_; }
  const std::vector<double>& operator[](const std::string& key) const;  // throws if absent

 private:
  std::vector<int64_t> epochs_;
  std::map<std::string, std::vector<double>> history_;
};

// Hooks as functions: LambdaCallback({.on_step_end = [](train::RunContext& c) { ... }}).
struct LambdaHooks {
  using Hook = std::function<void(RunContext&)>;
  Hook on_train_begin, on_epoch_begin, on_step_begin, on_step_end, on_epoch_end, on_train_end;
  Hook on_eval_begin, on_eval_step_begin, on_eval_step_end, on_eval_end;
};
class LambdaCallback : public Callback {
 public:
  explicit LambdaCallback(LambdaHooks hooks) : h_(std::move(hooks)) {}
  void on_train_begin(RunContext& c) override { call(h_.on_train_begin, c); }
  void on_epoch_begin(RunContext& c) override { call(h_.on_epoch_begin, c); }
  void on_step_begin(RunContext& c) override { call(h_.on_step_begin, c); }
  void on_step_end(RunContext& c) override { call(h_.on_step_end, c); }
  void on_epoch_end(RunContext& c) override { call(h_.on_epoch_end, c); }
  void on_train_end(RunContext& c) override { call(h_.on_train_end, c); }
  void on_eval_begin(RunContext& c) override { call(h_.on_eval_begin, c); }
  void on_eval_step_begin(RunContext& c) override { call(h_.on_eval_step_begin, c); }
  void on_eval_step_end(RunContext& c) override { call(h_.on_eval_step_end, c); }
  void on_eval_end(RunContext& c) override { call(h_.on_eval_end, c); }

 private:
  static void call(const LambdaHooks::Hook& h, RunContext& c) {
    if (h) h(c);
  }
  LambdaHooks h_;
};

// A per-epoch progress bar. On a terminal (isatty(stderr)) one line redrawn with '\r' at most
// every min_interval seconds:
//   epoch 1/5  120/938 [===>                ] loss 0.2345  3512.4 img/s  ETA 00:12
// Otherwise (logs, CI) plain lines every log_every steps and at the epoch end:
//   epoch 1/5 step 100/938 loss 0.2345 img/s 3512.4 eta 12s
//   epoch 1/5 done 938/938 loss 0.2345 mean_loss 0.3102 img/s 3498.0 time 13.4s eval_loss 0.29 ...
struct ProgressBarOptions {
  std::ostream* stream = nullptr;  // default std::cerr
  std::optional<bool> tty;         // default: isatty(stderr) when stream is std::cerr, else false
  int64_t log_every = 50;          // plain mode: a line every N steps (0: epoch ends only)
  double min_interval = 0.1;       // terminal mode: seconds between redraws
  int width = 24;                  // characters of the bar
  // Data-parallel replicas reading different batches (each rank sees 1/replicas of the data):
  // img/s is this rank's samples times replicas, the job's rate.
  int64_t replicas = 1;
};
class ProgressBar : public Callback {
 public:
  explicit ProgressBar(ProgressBarOptions opts = {});
  void on_train_begin(RunContext& ctx) override;
  void on_epoch_begin(RunContext& ctx) override;
  void on_step_end(RunContext& ctx) override;
  void on_epoch_end(RunContext& ctx) override;

 private:
  std::ostream& out() const;
  void draw(const RunContext& ctx, bool final);
  ProgressBarOptions opts_;
  bool tty_ = false;
  double last_draw_ = -1;
  size_t last_len_ = 0;
};

// Per-epoch learning rates (PyTorch's LambdaLR): at each epoch's begin every parameter group's lr
// becomes its lr at train begin times lr_lambda(e), e the 0-based epoch. linear_lr / one_cycle_lr
// give YOLOv5's two schedules.
class LambdaLR : public Callback {
 public:
  explicit LambdaLR(std::function<double(int64_t epoch)> lr_lambda);
  void on_train_begin(RunContext& ctx) override;
  void on_epoch_begin(RunContext& ctx) override;
  const std::vector<double>& base_lrs() const { return base_; }

 private:
  std::function<double(int64_t)> lambda_;
  std::vector<double> base_;
};
// (1 - e / epochs) (1 - lrf) + lrf: from 1 down to lrf.
std::function<double(int64_t)> linear_lr(double lrf, int64_t epochs);
// ((1 - cos(e pi / epochs)) / 2) (lrf - 1) + 1: a half cosine from 1 down to lrf.
std::function<double(int64_t)> one_cycle_lr(double lrf, int64_t epochs);

// Warm-up over the first `steps` training steps (0-based global step ni = 0 .. steps), each value
// interpolated linearly in ni from its start to its end (YOLOv5's np.interp):
//   - group g's lr from start_lrs[g] (default 0) to the lr the group has when the step begins
//     (its schedule's, or what a schedule callback such as LambdaLR set; the group's schedule is
//     put back after the step);
//   - the momentum from momentum_start to momentum_end (default: the optimizer's at train begin);
//   - the gradient-accumulation count of Model's TrainOneStepCell, max(1, round(from ... to)),
//     which needs GradAccumulation::kSum (its count may change at any step).
// steps = max(round(epochs * steps_per_epoch), min_steps). Later steps are left alone.
struct WarmUpOptions {
  double epochs = 3;
  int64_t min_steps = 100;
  std::vector<double> start_lrs = {};  // per group; missing entries start at 0
  std::optional<double> momentum_start, momentum_end;
  std::optional<std::pair<double, double>> accumulation;  // {from, to}
};
class WarmUp : public Callback {
 public:
  explicit WarmUp(WarmUpOptions opts = {});
  void on_train_begin(RunContext& ctx) override;
  void on_step_begin(RunContext& ctx) override;
  void on_step_end(RunContext& ctx) override;
  int64_t steps() const { return steps_; }  // after on_train_begin

 private:
  WarmUpOptions opts_;
  int64_t steps_ = 0;
  double momentum_end_ = 0;
  std::vector<optim::LearningRate> saved_;  // the groups' schedules, put back after the step
};

// An exponential moving average of a network's parameters and floating buffers, kept in a second
// network of the same architecture (the one to evaluate and save), updated after every optimizer
// update (the optimizer's global step advanced; a skipped or accumulating step is no update):
//   d = decay (1 - exp(-updates / tau));  ema = d ema + (1 - d) value
// (YOLOv5's ModelEMA). The EMA network starts as a copy of `model` and is kept in eval mode.
struct EMAOptions {
  double decay = 0.9999;
  double tau = 2000;
};
class EMA : public Callback {
 public:
  EMA(const nn::Cell& model, std::shared_ptr<nn::Cell> ema, EMAOptions opts = {});
  void on_train_begin(RunContext& ctx) override;
  void on_step_end(RunContext& ctx) override;
  // One update from model (what on_step_end does after an optimizer update).
  void update(const nn::Cell& model);
  const std::shared_ptr<nn::Cell>& ema_network() const { return ema_; }
  int64_t updates() const { return updates_; }
  void set_updates(int64_t u) { updates_ = u; }

 private:
  std::shared_ptr<nn::Cell> ema_;
  EMAOptions opts_;
  int64_t updates_ = 0, last_step_ = -1;
};

// Formats seconds as "MM:SS" (or "H:MM:SS" past an hour), for progress displays.
std::string format_duration(double seconds);

}  // namespace spore::train
