// Learning-rate schedules, MindSpore's two forms:
//  * nn.* dynamic-LR functions (piecewise_constant_lr, cosine_decay_lr, ...): one value per step,
//    computed up front from epochs (step_per_epoch steps each); pass the vector as a LearningRate.
//  * nn.*LR cells (CosineDecayLR, ...): a callable of the global step (LrSchedule), here the
//    functions without the _lr suffix. linear_warmup() prepends a warm-up to any schedule.
// Values follow MindSpore's formulas to the last bit (same operation order), e.g.
//   cosine_decay_lr(0.01, 0.1, 6, 2, 2) -> [0.1, 0.1, 0.05500000000000001, ..., 0.01, 0.01].
#pragma once
#include <cstdint>
#include <vector>

#include "spore/optim/optimizer.h"

namespace spore::optim {

// ---- per-step lists (mindspore.nn dynamic_lr) ---------------------------------------------------
// values[i] for steps [milestones[i-1], milestones[i]); milestones strictly increasing.
std::vector<double> piecewise_constant_lr(const std::vector<int64_t>& milestones,
                                          const std::vector<double>& values);
// epoch e = floor(i / step_per_epoch): lr * decay_rate^(e / decay_epoch) (floored when is_stair).
std::vector<double> exponential_decay_lr(double lr, double decay_rate, int64_t total_step,
                                         int64_t step_per_epoch, int64_t decay_epoch,
                                         bool is_stair = false);
// lr * e^(-decay_rate * e) (e rounded down to a multiple of decay_epoch when is_stair).
std::vector<double> natural_exp_decay_lr(double lr, double decay_rate, int64_t total_step,
                                         int64_t step_per_epoch, int64_t decay_epoch,
                                         bool is_stair = false);
// lr / (1 + decay_rate * e / decay_epoch) (the ratio floored when is_stair).
std::vector<double> inverse_decay_lr(double lr, double decay_rate, int64_t total_step,
                                     int64_t step_per_epoch, int64_t decay_epoch,
                                     bool is_stair = false);
// min_lr + 0.5 (max_lr - min_lr)(1 + cos(pi * min(e, decay_epoch) / decay_epoch)).
std::vector<double> cosine_decay_lr(double min_lr, double max_lr, int64_t total_step,
                                    int64_t step_per_epoch, int64_t decay_epoch);
// (lr - end_lr)(1 - min(e, decay_epoch) / decay_epoch)^power + end_lr; with update_decay_epoch
// the decay period grows to the next multiple of decay_epoch instead of stopping.
std::vector<double> polynomial_decay_lr(double lr, double end_lr, int64_t total_step,
                                        int64_t step_per_epoch, int64_t decay_epoch, double power,
                                        bool update_decay_epoch = false);
// lr * min(e, warmup_epoch) / warmup_epoch.
std::vector<double> warmup_lr(double lr, int64_t total_step, int64_t step_per_epoch,
                              int64_t warmup_epoch);

// ---- schedules of the global step (mindspore.nn *LR cells) -----------------------------------
LrSchedule constant(double lr);
LrSchedule piecewise_constant(std::vector<int64_t> milestones, std::vector<double> values);
// nn.ExponentialDecayLR: lr * decay_rate^(step / decay_steps) (floored when is_stair).
LrSchedule exponential_decay(double lr, double decay_rate, int64_t decay_steps,
                             bool is_stair = false);
LrSchedule natural_exp_decay(double lr, double decay_rate, int64_t decay_steps,
                             bool is_stair = false);
LrSchedule inverse_decay(double lr, double decay_rate, int64_t decay_steps, bool is_stair = false);
// nn.CosineDecayLR: min_lr + 0.5 (max_lr - min_lr)(1 + cos(pi * min(step, decay_steps) /
// decay_steps)).
LrSchedule cosine_decay(double min_lr, double max_lr, int64_t decay_steps);
// nn.PolynomialDecayLR.
LrSchedule polynomial_decay(double lr, double end_lr, int64_t decay_steps, double power,
                            bool update_decay_steps = false);
// nn.WarmUpLR: lr * min(step, warmup_steps) / warmup_steps.
LrSchedule warmup(double lr, int64_t warmup_steps);
// Linear warm-up into `schedule`: steps 0..warmup_steps-1 ramp as schedule(0) * (step + 1) /
// warmup_steps; afterwards schedule(step - warmup_steps), so the schedule starts after warm-up.
LrSchedule linear_warmup(LrSchedule schedule, int64_t warmup_steps);

}  // namespace spore::optim
