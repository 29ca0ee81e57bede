// The callbacks that steer training from step to step (train/callbacks.h): LambdaLR (per-epoch
// learning rates), WarmUp (lr, momentum and accumulation ramps) and EMA (a moving average of the
// weights). They act through the optimizer's group lrs and momentum and the TrainOneStepCell's
// accumulation count, which a compiled step reads at run time: none of them recompiles it.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "spore/grad_mode.h"
#include "spore/ops.h"
#include "spore/train/callbacks.h"
#include "spore/train/model.h"

namespace spore::train {
namespace {

double interp(double x, double x0, double x1, double y0, double y1) {  // np.interp on [x0, x1]
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

optim::Optimizer& optimizer_of(const RunContext& ctx, const char* who) {
  SPORE_CHECK(ctx.optimizer != nullptr, "[", who,
              "] the run has no optimizer; use this callback with Model::train / fit");
  return *ctx.optimizer;
}

}  // namespace

// ---- LambdaLR -----------------------------------------------------------------------------------

LambdaLR::LambdaLR(std::function<double(int64_t)> lr_lambda) : lambda_(std::move(lr_lambda)) {
  SPORE_CHECK(lambda_ != nullptr,
              "[LambdaLR] lr_lambda is empty; pass a function of the 0-based epoch such as "
              "train::linear_lr(0.01, epochs)");
}

void LambdaLR::on_train_begin(RunContext& ctx) {
  optim::Optimizer& opt = optimizer_of(ctx, "LambdaLR");
  base_.clear();
  for (size_t g = 0; g < opt.num_groups(); ++g) base_.push_back(opt.group_lr(g));
}

void LambdaLR::on_epoch_begin(RunContext& ctx) {
  optim::Optimizer& opt = optimizer_of(ctx, "LambdaLR");
  const double f = lambda_(ctx.epoch - 1);
  SPORE_CHECK(std::isfinite(f) && f >= 0, "[LambdaLR] lr_lambda(", ctx.epoch - 1, ") returned ", f,
              "; it must return a finite factor >= 0");
  for (size_t g = 0; g < base_.size(); ++g) opt.set_group_lr(g, base_[g] * f);
}

std::function<double(int64_t)> linear_lr(double lrf, int64_t epochs) {
  SPORE_CHECK(epochs >= 1, "[linear_lr] epochs must be >= 1, got ", epochs);
  return [lrf, epochs](int64_t e) { return (1 - double(e) / double(epochs)) * (1.0 - lrf) + lrf; };
}

std::function<double(int64_t)> one_cycle_lr(double lrf, int64_t epochs) {
  SPORE_CHECK(epochs >= 1, "[one_cycle_lr] epochs must be >= 1, got ", epochs);
  return [lrf, epochs](int64_t e) {
    return ((1 - std::cos(double(e) * std::numbers::pi / double(epochs))) / 2) * (lrf - 1) + 1;
  };
}

// ---- WarmUp -------------------------------------------------------------------------------------

WarmUp::WarmUp(WarmUpOptions opts) : opts_(std::move(opts)) {
  SPORE_CHECK(opts_.epochs >= 0 && opts_.min_steps >= 0, "[WarmUp] epochs (", opts_.epochs,
              ") and min_steps (", opts_.min_steps, ") must be >= 0; use 0 and 0 for no warm-up");
  if (opts_.accumulation)
    SPORE_CHECK(opts_.accumulation->first >= 1 && opts_.accumulation->second >= 1,
                "[WarmUp] the accumulation ramp goes from ", opts_.accumulation->first, " to ",
                opts_.accumulation->second,
                "; both counts must be >= 1 (micro-batches per update)");
}

void WarmUp::on_train_begin(RunContext& ctx) {
  optim::Optimizer& opt = optimizer_of(ctx, "WarmUp");
  SPORE_CHECK(opts_.start_lrs.size() <= opt.num_groups(), "[WarmUp] start_lrs has ",
              opts_.start_lrs.size(), " entries but the optimizer has ", opt.num_groups(),
              " parameter group(s); give at most one start lr per group");
  steps_ = std::max<int64_t>(int64_t(std::llround(opts_.epochs * double(ctx.steps_per_epoch))),
                             opts_.min_steps);
  if (opts_.momentum_start) {
    SPORE_CHECK(opt.momentum().has_value(), "[WarmUp] momentum_start is set but ", opt.name(),
                " has no momentum; use Momentum or SGD with momentum, or leave momentum_start out");
    momentum_end_ = opts_.momentum_end.value_or(*opt.momentum());
  }
  if (opts_.accumulation) {
    SPORE_CHECK(ctx.model != nullptr && ctx.model->train_network() != nullptr,
                "[WarmUp] an accumulation ramp needs Model::train's TrainOneStepCell");
    SPORE_CHECK(ctx.model->train_network()->grad_accumulation_mode() == GradAccumulation::kSum,
                "[WarmUp] an accumulation ramp changes the count at every step, which needs "
                "GradAccumulation::kSum; call model.train_network()->set_grad_accumulation(k, "
                "train::GradAccumulation::kSum) before training");
  }
}

void WarmUp::on_step_begin(RunContext& ctx) {
  saved_.clear();
  const int64_t ni = ctx.global_step - 1;  // 0-based, as YOLOv5's
  if (ni > steps_ || steps_ == 0) return;
  optim::Optimizer& opt = optimizer_of(ctx, "WarmUp");
  const double x = double(ni), x1 = double(steps_);
  for (size_t g = 0; g < opt.num_groups(); ++g) {
    saved_.push_back(opt.group_lr_schedule(g));
    const double start = g < opts_.start_lrs.size() ? opts_.start_lrs[g] : 0.0;
    opt.set_group_lr(g, interp(x, 0, x1, start, opt.group_lr(g)));
  }
  if (opts_.momentum_start)
    opt.set_momentum(interp(x, 0, x1, *opts_.momentum_start, momentum_end_));
  if (opts_.accumulation) {
    const double k = interp(x, 0, x1, opts_.accumulation->first, opts_.accumulation->second);
    ctx.model->train_network()->set_grad_accumulation(
        std::max<int64_t>(1, int64_t(std::nearbyint(k))), GradAccumulation::kSum);
  }
  ctx.lr = opt.current_lr();
}

void WarmUp::on_step_end(RunContext& ctx) {
  if (saved_.empty()) return;
  optim::Optimizer& opt = optimizer_of(ctx, "WarmUp");
  for (size_t g = 0; g < saved_.size(); ++g) opt.set_group_lr(g, saved_[g]);
  saved_.clear();
}

// ---- EMA ----------------------------------------------------------------------------------------

EMA::EMA(const nn::Cell& model, std::shared_ptr<nn::Cell> ema, EMAOptions opts)
    : ema_(std::move(ema)), opts_(opts) {
  SPORE_CHECK(ema_ != nullptr,
              "[EMA] the EMA network is null; pass a second network of the same "
              "architecture");
  SPORE_CHECK(opts_.decay >= 0 && opts_.decay < 1 && opts_.tau > 0,
              "[EMA] decay must be in [0, 1) "
              "and tau > 0, got decay ",
              opts_.decay, " and tau ", opts_.tau, "; YOLOv5 uses 0.9999 and 2000");
  const auto src = model.parameters_and_buffers();
  const auto dst = ema_->parameters_and_buffers();
  SPORE_CHECK(src.size() == dst.size(), "[EMA] the EMA network has ", dst.size(),
              " parameters and buffers, the model ", src.size(),
              "; build both with the same configuration");
  NoGradGuard ng;
  for (size_t i = 0; i < src.size(); ++i) {
    SPORE_CHECK(src[i].second.shape() == dst[i].second.shape(), "[EMA] ", src[i].first,
                " has shape ", shape_str(src[i].second.shape()), " in the model but ",
                shape_str(dst[i].second.shape()), " in the EMA network (", dst[i].first,
                "); build both with the same configuration");
    assign(dst[i].second, src[i].second);
  }
  ema_->set_train(false);
}

void EMA::on_train_begin(RunContext& ctx) {
  last_step_ = ctx.optimizer ? ctx.optimizer->global_step() : -1;
}

void EMA::on_step_end(RunContext& ctx) {
  SPORE_CHECK(ctx.network != nullptr && ctx.optimizer != nullptr,
              "[EMA] the run has no network or optimizer; use this callback with Model::train");
  const int64_t s = ctx.optimizer->global_step();
  if (s == last_step_) return;  // accumulating, or an overflowed step skipped: no update
  last_step_ = s;
  update(*ctx.network);
}

void EMA::update(const nn::Cell& model) {
  ++updates_;
  const double d = opts_.decay * (1 - std::exp(-double(updates_) / opts_.tau));
  const auto src = model.parameters_and_buffers();
  const auto dst = ema_->parameters_and_buffers();
  NoGradGuard ng;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!is_floating(dst[i].second.dtype())) continue;
    assign(dst[i].second, dst[i].second * d + src[i].second.detach() * (1 - d));
  }
}

}  // namespace spore::train
