// Mixed precision (MindSpore's mindspore.amp): amp levels, the per-cell precision policy, loss
// scale managers and build_train_network.
//
//   auto net = std::make_shared<models::LeNet5>();
//   auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
//   auto step = amp::build_train_network(net, opt, loss_fn, amp::Level::O2, nullptr, {},
//   kBFloat16); auto out = step->forward({images, labels});   // {loss, overflow, scale}
//
// Levels (the rule for each op is amp::decide, src/amp/policy.cpp; design in docs/amp.md):
//   O0  float32.
//   O1  the white list (conv, matmul, relu) in low precision, cast back to float32 after.
//   O2  everything in low precision except BatchNorm/LayerNorm cells (float32 math on the
//       low-precision activations); network output cast to float32; dynamic loss scaling.
//   O3  everything in low precision, no loss scaling.
// Parameters always stay float32 ("master weights"): casts are inserted where ops read them, so
// their gradients come back float32. PyNative casts in the dispatcher; Graph mode inserts the same
// casts as graph nodes (a pass), so both modes compute the same ops in the same dtype.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spore/dtype.h"
#include "spore/pending.h"
#include "spore/tensor.h"

namespace spore {
namespace nn {
class Cell;
}
namespace ops {
class PrecisionPolicy;  // the dispatcher's precision hook (internal); amp implements it
}
namespace optim {
class Optimizer;
}

namespace amp {

enum class Level : uint8_t { O0, O1, O2, O3 };
const char* level_name(Level l);  // "O0".."O3"
// "O0".."O3" (case-insensitive); anything else is a ValueError listing the levels.
Level parse_level(const std::string& s);
// The low-precision dtype by name: "fp16" / "float16" / "half", "bf16" / "bfloat16"; anything else
// is a ValueError naming the accepted spellings.
DType parse_dtype(const std::string& s);

struct Policy {
  Level level = Level::O0;
  DType dtype = kFloat16;     // the low-precision dtype: kFloat16 or kBFloat16
  bool keep_float32 = false;  // the cell computes in float32 (BatchNorm/LayerNorm under O2)
  bool active() const { return level != Level::O0; }
  bool operator==(const Policy&) const = default;
  std::string str() const;  // "O2/bfloat16", "O2/bfloat16/fp32-cell", "O0"
};

// The policy ops run under on this thread (Level::O0 when none).
const Policy& current_policy();
// Makes a policy current until destroyed (nests; restores the previous one).
class PolicyScope {
 public:
  explicit PolicyScope(const Policy& p);
  ~PolicyScope();
  PolicyScope(const PolicyScope&) = delete;
  PolicyScope& operator=(const PolicyScope&) = delete;

 private:
  const ops::PrecisionPolicy* prev_;
};

// Sets the precision policy on every cell of the tree (MindSpore's auto_mixed_precision). O2 marks
// BatchNorm*/LayerNorm cells keep_float32 unless keep_batchnorm_fp32 is false. dtype: kFloat16 or
// kBFloat16 (a TypeError otherwise). O0 clears the policies (everything float32).
void auto_mixed_precision(nn::Cell& network, Level level, DType dtype = kFloat16,
                          bool keep_batchnorm_fp32 = true);
inline void auto_mixed_precision(const std::shared_ptr<nn::Cell>& network, Level level,
                                 DType dtype = kFloat16, bool keep_batchnorm_fp32 = true) {
  auto_mixed_precision(*network, level, dtype, keep_batchnorm_fp32);
}

// True (a bool scalar) when no element of any input is inf or nan: one pass over all of them (the
// AllFinite primitive). Integer inputs count as finite.
Tensor all_finite(const std::vector<Tensor>& inputs);

// ---- loss scaling ------------------------------------------------------------------------------
// A manager holds the scale the loss gradient is multiplied by (so float16 gradients do not
// underflow) and decides what happens after a step whose gradients overflowed (inf/nan).
class LossScaleManager {
 public:
  virtual ~LossScaleManager() = default;
  virtual double get_loss_scale() const = 0;
  // After each step: overflow = some gradient was inf/nan.
  virtual void update_loss_scale(bool overflow) = 0;
  // Whether an overflowed step skips the optimizer update.
  virtual bool get_drop_overflow_update() const = 0;
  // Whether the scale changes at run time (MindSpore: get_update_cell() is not None).
  virtual bool updates_scale() const = 0;
  virtual std::string name() const = 0;
  // A step whose outcome the device decided and the host has not booked yet (the loss-scaled
  // step, train/wrappers.cpp) leaves `book` here: reading the manager's state books it first, so
  // what it answers is never a step behind. Null: nothing pending.
  void set_pending_step(std::function<void()> book) const { pending_.set(std::move(book)); }

 protected:
  void settle() const { pending_.run(); }

 private:
  PendingAction pending_;
};
using LossScaleManagerPtr = std::shared_ptr<LossScaleManager>;

// A constant scale. drop_overflow_update: overflowed steps are skipped (then build_train_network
// returns a TrainOneStepWithLossScaleCell); false: every step is applied (a TrainOneStepCell with
// sens = loss_scale, whose optimizer unscales).
class FixedLossScaleManager : public LossScaleManager {
 public:
  explicit FixedLossScaleManager(double loss_scale = 128.0, bool drop_overflow_update = true);
  double get_loss_scale() const override { return scale_; }
  void update_loss_scale(bool) override {}
  bool get_drop_overflow_update() const override { return drop_; }
  bool updates_scale() const override { return drop_; }
  std::string name() const override { return "FixedLossScaleManager"; }

 private:
  double scale_;
  bool drop_;
};

// On overflow: scale = max(scale / scale_factor, 1) and the step is dropped; after scale_window
// consecutive clean steps: scale *= scale_factor.
class DynamicLossScaleManager : public LossScaleManager {
 public:
  explicit DynamicLossScaleManager(double init_loss_scale = 16777216.0, double scale_factor = 2,
                                   int64_t scale_window = 2000);
  double get_loss_scale() const override {
    settle();
    return scale_;
  }
  void update_loss_scale(bool overflow) override;
  bool get_drop_overflow_update() const override { return true; }
  bool updates_scale() const override { return true; }
  std::string name() const override { return "DynamicLossScaleManager"; }
  int64_t good_steps() const {  // clean steps since the last change
    settle();
    return good_steps_;
  }
  double scale_factor() const { return factor_; }
  int64_t scale_window() const { return window_; }
  // The largest scale: float32's largest finite power of two (the step reads it in float32).
  static constexpr double kMaxScale = 1.7014118346046923e38;
  // Continues a run from a checkpoint's scale and count (resume); checked: scale >= 1 and finite,
  // 0 <= good_steps < scale_window.
  void restore(double scale, int64_t good_steps);

 private:
  double scale_, factor_;
  int64_t window_, good_steps_ = 0;
};

// A cell that runs `network` and casts its floating outputs to float32 (MindSpore's _OutputTo32):
// what O2/O3 put between the network and the loss (and the metrics).
std::shared_ptr<nn::Cell> with_float32_output(std::shared_ptr<nn::Cell> network);

// MindSpore's build_train_network: applies the level to `network` (auto_mixed_precision), wraps
// it with the loss (O2/O3: the network output is cast to float32 first) and returns the training
// step cell: a train::TrainOneStepWithLossScaleCell when the manager updates the scale (O2's
// default DynamicLossScaleManager, or a Fixed one that drops overflowed steps), else a
// train::TrainOneStepCell with sens = loss_scale (1 without a manager).
//   loss_fn null: `network` already returns the loss (no output cast then).
//   loss_scale_manager null: the level's default (O2: DynamicLossScaleManager(); others: none).
//   keep_batchnorm_fp32: default true for O2, false otherwise.
//   cast_model_type: the low-precision dtype (default float16); float16 or bfloat16.
std::shared_ptr<nn::Cell> build_train_network(
    std::shared_ptr<nn::Cell> network, std::shared_ptr<optim::Optimizer> optimizer,
    std::shared_ptr<nn::Cell> loss_fn = nullptr, Level level = Level::O0,
    LossScaleManagerPtr loss_scale_manager = nullptr,
    std::optional<bool> keep_batchnorm_fp32 = std::nullopt,
    std::optional<DType> cast_model_type = std::nullopt);

}  // namespace amp
}  // namespace spore
