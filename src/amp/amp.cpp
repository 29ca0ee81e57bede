// The framework side of mixed precision (spore/amp.h): auto_mixed_precision (policies on the cell
// tree), the loss scale managers, the float32-output wrapper and build_train_network. The op-level
// rule is in policy.cpp; PyNative casts happen in the dispatcher (ops/op.cpp), Graph mode's in
// graph/passes/amp_casts.cpp.
#include <cmath>

#include "amp/policy.h"
#include "spore/nn/cell.h"
#include "spore/ops.h"
#include "spore/optim/optimizer.h"
#include "spore/train/wrappers.h"

namespace spore::amp {
namespace {

void check_low_dtype(DType t, const char* who) {
  SPORE_CHECK_TYPE(t == kFloat16 || t == kBFloat16, "[", who,
                   "] the low-precision dtype must be float16 or bfloat16, got ", dtype_name(t));
}

// The cells O2 keeps in float32 (MindSpore's keep_batchnorm_fp32 covers BatchNorm, SyncBatchNorm
// and LayerNorm).
bool is_norm_cell(const nn::Cell& c) {
  const std::string n = c.cls_name();
  return n.rfind("BatchNorm", 0) == 0 || n == "SyncBatchNorm" || n == "LayerNorm";
}

class OutputTo32 : public nn::Cell {
 public:
  explicit OutputTo32(nn::CellPtr net) : net_(std::move(net)) {
    SPORE_CHECK(net_ != nullptr, "[amp] with_float32_output: network is null");
    set_cls_name("_OutputTo32");
    register_cell("_backbone", net_);
  }
  Tensor construct(const Tensor& x) override { return f32((*net_)(x)); }
  Tensor construct(const Tensor& x, const Tensor& y) override { return f32((*net_)(x, y)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override {
    std::vector<Tensor> out = net_->forward(inputs);
    for (Tensor& t : out) t = f32(t);
    return out;
  }

 private:
  static Tensor f32(const Tensor& t) {
    return t.dtype() == kFloat16 || t.dtype() == kBFloat16 ? cast(t, kFloat32) : t;
  }
  nn::CellPtr net_;
};

}  // namespace

Tensor all_finite(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> defined;
  defined.reserve(inputs.size());
  for (const Tensor& t : inputs)
    if (t.defined()) defined.push_back(t);
  return ops::call1(ops::OpId::AllFinite, defined);
}

void auto_mixed_precision(nn::Cell& network, Level level, DType dtype, bool keep_batchnorm_fp32) {
  if (level == Level::O0) {
    for (auto& [_, c] : network.named_cells()) c->clear_amp_policy();
    return;
  }
  check_low_dtype(dtype, "auto_mixed_precision");
  for (auto& [_, c] : network.named_cells()) {
    Policy p{level, dtype, false};
    if (level == Level::O2 && keep_batchnorm_fp32 && is_norm_cell(*c)) p.keep_float32 = true;
    c->set_amp_policy(p);
  }
}

std::shared_ptr<nn::Cell> with_float32_output(std::shared_ptr<nn::Cell> network) {
  return std::make_shared<OutputTo32>(std::move(network));
}

// ---- loss scale managers ------------------------------------------------------------------------

FixedLossScaleManager::FixedLossScaleManager(double loss_scale, bool drop_overflow_update)
    : scale_(loss_scale), drop_(drop_overflow_update) {
  SPORE_CHECK(std::isfinite(loss_scale) && loss_scale >= 1,
              "[FixedLossScaleManager] loss_scale must be a finite "
              "number >= 1, got ",
              loss_scale);
}

DynamicLossScaleManager::DynamicLossScaleManager(double init_loss_scale, double scale_factor,
                                                 int64_t scale_window)
    : scale_(init_loss_scale), factor_(scale_factor), window_(scale_window) {
  SPORE_CHECK(std::isfinite(init_loss_scale) && init_loss_scale >= 1,
              "[DynamicLossScaleManager] init_loss_scale "
              "must be a finite number >= 1, got ",
              init_loss_scale);
  SPORE_CHECK(std::isfinite(scale_factor) && scale_factor > 1,
              "[DynamicLossScaleManager] scale_factor must be > 1, "
              "got ",
              scale_factor);
  SPORE_CHECK(scale_window >= 1, "[DynamicLossScaleManager] scale_window must be >= 1, got ",
              scale_window);
}

void DynamicLossScaleManager::restore(double scale, int64_t good_steps) {
  settle();  // the steps before it are booked first; the restored values then replace theirs
  SPORE_CHECK(std::isfinite(scale) && scale >= 1,
              "[DynamicLossScaleManager] restore: the loss scale ", "must be finite and >= 1, got ",
              scale);
  SPORE_CHECK(good_steps >= 0 && good_steps < window_, "[DynamicLossScaleManager] restore: ",
              "good_steps must be in [0, scale_window = ", window_, "), got ", good_steps);
  scale_ = scale;
  good_steps_ = good_steps;
}

void DynamicLossScaleManager::update_loss_scale(bool overflow) {
  if (overflow) {
    scale_ = std::max(scale_ / factor_, 1.0);
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= window_) {
    // float32's largest finite power of two bounds the scale (it is fed to the graph in float32).
    scale_ = std::min(scale_ * factor_, kMaxScale);
    good_steps_ = 0;
  }
}

// ---- build_train_network ------------------------------------------------------------------------

std::shared_ptr<nn::Cell> build_train_network(std::shared_ptr<nn::Cell> network,
                                              std::shared_ptr<optim::Optimizer> optimizer,
                                              std::shared_ptr<nn::Cell> loss_fn, Level level,
                                              LossScaleManagerPtr loss_scale_manager,
                                              std::optional<bool> keep_batchnorm_fp32,
                                              std::optional<DType> cast_model_type) {
  SPORE_CHECK(network != nullptr, "[build_train_network] network is null");
  SPORE_CHECK(optimizer != nullptr, "[build_train_network] optimizer is null");
  const DType dtype = cast_model_type.value_or(kFloat16);
  check_low_dtype(dtype, "build_train_network");
  // O0 leaves the cells as they are (a user's to_float islands included).
  if (level != Level::O0)
    auto_mixed_precision(*network, level, dtype, keep_batchnorm_fp32.value_or(level == Level::O2));
  nn::CellPtr net = network;
  if (loss_fn) {
    if (level == Level::O2 || level == Level::O3) net = with_float32_output(net);
    net = std::make_shared<train::WithLossCell>(net, loss_fn);
  }
  if (!loss_scale_manager && level == Level::O2)
    loss_scale_manager = std::make_shared<DynamicLossScaleManager>();
  if (loss_scale_manager && loss_scale_manager->updates_scale())
    return std::make_shared<train::TrainOneStepWithLossScaleCell>(net, optimizer,
                                                                  loss_scale_manager);
  const double scale = loss_scale_manager ? loss_scale_manager->get_loss_scale() : 1.0;
  // MindSpore leaves matching the optimizer's loss_scale to the user; setting it here makes the
  // returned step correct as it is (gradients are unscaled before the update).
  if (scale != 1.0) optimizer->set_loss_scale(scale);
  return std::make_shared<train::TrainOneStepCell>(net, optimizer, scale);
}

}  // namespace spore::amp
