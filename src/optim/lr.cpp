// Learning-rate schedules (optim/lr.h). The per-step functions copy mindspore.nn.dynamic_lr's
// formulas including the order of operations, so the values match MindSpore's bit for bit; the
// callable forms follow mindspore.nn.learning_rate_schedule.
#include "spore/optim/lr.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "spore/error.h"

namespace spore::optim {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kE = std::numbers::e;

void check_positive(const char* fn, const char* what, double v) {
  SPORE_CHECK(v > 0, "[", fn, "] ", what, " must be > 0, got ", v);
}
void check_non_negative(const char* fn, const char* what, double v) {
  SPORE_CHECK(v >= 0, "[", fn, "] ", what, " must be >= 0, got ", v);
}
void check_steps(const char* fn, int64_t total_step, int64_t step_per_epoch, int64_t epochs,
                 const char* epochs_name) {
  SPORE_CHECK(total_step > 0, "[", fn, "] total_step must be > 0, got ", total_step);
  SPORE_CHECK(step_per_epoch > 0, "[", fn, "] step_per_epoch must be > 0, got ", step_per_epoch);
  SPORE_CHECK(epochs > 0, "[", fn, "] ", epochs_name, " must be > 0, got ", epochs);
}
// Python's math.floor(i / step_per_epoch) for non-negative ints.
double epoch_of(int64_t i, int64_t step_per_epoch) { return double(i / step_per_epoch); }
// One learning rate per step from f(epoch of that step), in step order (f may carry state).
template <typename F>
std::vector<double> per_step(int64_t total_step, int64_t step_per_epoch, F&& f) {
  std::vector<double> lr;
  lr.reserve(size_t(total_step));
  for (int64_t i = 0; i < total_step; ++i) lr.push_back(f(epoch_of(i, step_per_epoch)));
  return lr;
}

}  // namespace

std::vector<double> piecewise_constant_lr(const std::vector<int64_t>& milestones,
                                          const std::vector<double>& values) {
  SPORE_CHECK(!milestones.empty(), "[piecewise_constant_lr] milestones must not be empty");
  SPORE_CHECK(milestones.size() == values.size(), "[piecewise_constant_lr] milestones (",
              milestones.size(), " values) and learning_rates (", values.size(),
              " values) must have the same length");
  std::vector<double> lr;
  int64_t last = 0;
  for (size_t i = 0; i < milestones.size(); ++i) {
    SPORE_CHECK(milestones[i] > last,
                "[piecewise_constant_lr] milestones must be positive and "
                "strictly increasing, got ",
                milestones[i], " after ", last);
    lr.insert(lr.end(), size_t(milestones[i] - last), values[i]);
    last = milestones[i];
  }
  return lr;
}

std::vector<double> exponential_decay_lr(double learning_rate, double decay_rate,
                                         int64_t total_step, int64_t step_per_epoch,
                                         int64_t decay_epoch, bool is_stair) {
  const char* fn = "exponential_decay_lr";
  check_positive(fn, "learning_rate", learning_rate);
  check_positive(fn, "decay_rate", decay_rate);
  check_steps(fn, total_step, step_per_epoch, decay_epoch, "decay_epoch");
  return per_step(total_step, step_per_epoch, [&](double e) {
    double p = e / double(decay_epoch);
    if (is_stair) p = std::floor(p);
    return learning_rate * std::pow(decay_rate, p);
  });
}

std::vector<double> natural_exp_decay_lr(double learning_rate, double decay_rate,
                                         int64_t total_step, int64_t step_per_epoch,
                                         int64_t decay_epoch, bool is_stair) {
  const char* fn = "natural_exp_decay_lr";
  check_positive(fn, "learning_rate", learning_rate);
  check_positive(fn, "decay_rate", decay_rate);
  check_steps(fn, total_step, step_per_epoch, decay_epoch, "decay_epoch");
  return per_step(total_step, step_per_epoch, [&](double e) {
    if (is_stair) e = std::floor(e / double(decay_epoch)) * double(decay_epoch);
    return learning_rate * std::pow(kE, -decay_rate * e);
  });
}

std::vector<double> inverse_decay_lr(double learning_rate, double decay_rate, int64_t total_step,
                                     int64_t step_per_epoch, int64_t decay_epoch, bool is_stair) {
  const char* fn = "inverse_decay_lr";
  check_positive(fn, "learning_rate", learning_rate);
  check_positive(fn, "decay_rate", decay_rate);
  check_steps(fn, total_step, step_per_epoch, decay_epoch, "decay_epoch");
  return per_step(total_step, step_per_epoch, [&](double e) {
    double p = e / double(decay_epoch);
    if (is_stair) p = std::floor(p);
    return learning_rate / (1 + decay_rate * p);
  });
}

std::vector<double> cosine_decay_lr(double min_lr, double max_lr, int64_t total_step,
                                    int64_t step_per_epoch, int64_t decay_epoch) {
  const char* fn = "cosine_decay_lr";
  check_non_negative(fn, "min_lr", min_lr);
  check_positive(fn, "max_lr", max_lr);
  SPORE_CHECK(min_lr < max_lr, "[cosine_decay_lr] min_lr (", min_lr, ") must be less than max_lr (",
              max_lr, ")");
  check_steps(fn, total_step, step_per_epoch, decay_epoch, "decay_epoch");
  double delta = 0.5 * (max_lr - min_lr);
  return per_step(total_step, step_per_epoch, [&](double e) {
    e = std::min(e, double(decay_epoch));
    return min_lr + delta * (1 + std::cos(kPi * e / double(decay_epoch)));
  });
}

std::vector<double> polynomial_decay_lr(double learning_rate, double end_lr, int64_t total_step,
                                        int64_t step_per_epoch, int64_t decay_epoch, double power,
                                        bool update_decay_epoch) {
  const char* fn = "polynomial_decay_lr";
  check_positive(fn, "learning_rate", learning_rate);
  check_non_negative(fn, "end_learning_rate", end_lr);
  check_positive(fn, "power", power);
  check_steps(fn, total_step, step_per_epoch, decay_epoch, "decay_epoch");
  double delta = learning_rate - end_lr;
  double decay = double(decay_epoch);
  return per_step(total_step, step_per_epoch, [&](double e) {
    // MindSpore reassigns decay_epoch as it grows; it never shrinks, so carrying it is the same.
    double tmp;
    if (update_decay_epoch) {
      decay = decay * std::max(std::ceil(e / decay), 1.0);
      tmp = e;
    } else {
      tmp = std::min(decay, e);
    }
    return delta * std::pow(1 - tmp / decay, power) + end_lr;
  });
}

std::vector<double> warmup_lr(double learning_rate, int64_t total_step, int64_t step_per_epoch,
                              int64_t warmup_epoch) {
  const char* fn = "warmup_lr";
  check_positive(fn, "learning_rate", learning_rate);
  check_steps(fn, total_step, step_per_epoch, warmup_epoch, "warmup_epoch");
  return per_step(total_step, step_per_epoch, [&](double e) {
    return learning_rate * std::min(double(warmup_epoch), e) / double(warmup_epoch);
  });
}

// ---- schedules ----------------------------------------------------------------------------------

LrSchedule constant(double lr) {
  return [lr](int64_t) { return lr; };
}

LrSchedule piecewise_constant(std::vector<int64_t> milestones, std::vector<double> values) {
  piecewise_constant_lr(milestones, values);  // validates
  return [m = std::move(milestones), v = std::move(values)](int64_t step) {
    for (size_t i = 0; i < m.size(); ++i)
      if (step < m[i]) return v[i];
    return v.back();
  };
}

namespace {
void check_decay_steps(const char* fn, int64_t decay_steps) {
  SPORE_CHECK(decay_steps > 0, "[", fn, "] decay_steps must be > 0, got ", decay_steps);
}
}  // namespace

LrSchedule exponential_decay(double lr, double decay_rate, int64_t decay_steps, bool is_stair) {
  check_positive("exponential_decay", "learning_rate", lr);
  check_positive("exponential_decay", "decay_rate", decay_rate);
  check_decay_steps("exponential_decay", decay_steps);
  return [=](int64_t step) {
    double p = double(step) / double(decay_steps);
    if (is_stair) p = std::floor(p);
    return lr * std::pow(decay_rate, p);
  };
}

LrSchedule natural_exp_decay(double lr, double decay_rate, int64_t decay_steps, bool is_stair) {
  check_positive("natural_exp_decay", "learning_rate", lr);
  check_positive("natural_exp_decay", "decay_rate", decay_rate);
  check_decay_steps("natural_exp_decay", decay_steps);
  return [=](int64_t step) {
    double p = double(step) / double(decay_steps);
    if (is_stair) p = std::floor(p);
    return lr * std::exp(-decay_rate * p);
  };
}

LrSchedule inverse_decay(double lr, double decay_rate, int64_t decay_steps, bool is_stair) {
  check_positive("inverse_decay", "learning_rate", lr);
  check_positive("inverse_decay", "decay_rate", decay_rate);
  check_decay_steps("inverse_decay", decay_steps);
  return [=](int64_t step) {
    double p = double(step) / double(decay_steps);
    if (is_stair) p = std::floor(p);
    return lr / (1 + decay_rate * p);
  };
}

LrSchedule cosine_decay(double min_lr, double max_lr, int64_t decay_steps) {
  check_non_negative("cosine_decay", "min_lr", min_lr);
  check_positive("cosine_decay", "max_lr", max_lr);
  SPORE_CHECK(min_lr < max_lr, "[cosine_decay] min_lr (", min_lr, ") must be less than max_lr (",
              max_lr, ")");
  check_decay_steps("cosine_decay", decay_steps);
  return [=](int64_t step) {
    double p = double(std::min(step, decay_steps)) / double(decay_steps);
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + std::cos(kPi * p));
  };
}

LrSchedule polynomial_decay(double lr, double end_lr, int64_t decay_steps, double power,
                            bool update_decay_steps) {
  check_positive("polynomial_decay", "learning_rate", lr);
  check_non_negative("polynomial_decay", "end_learning_rate", end_lr);
  check_positive("polynomial_decay", "power", power);
  check_decay_steps("polynomial_decay", decay_steps);
  return [=](int64_t step) {
    double s = double(step), d = double(decay_steps);
    if (update_decay_steps)
      d = d * std::max(std::ceil(s / d), 1.0);
    else
      s = std::min(s, d);
    return (lr - end_lr) * std::pow(1 - s / d, power) + end_lr;
  };
}

LrSchedule warmup(double lr, int64_t warmup_steps) {
  check_positive("warmup", "learning_rate", lr);
  SPORE_CHECK(warmup_steps > 0, "[warmup] warmup_steps must be > 0, got ", warmup_steps);
  return [=](int64_t step) {
    return lr * double(std::min(step, warmup_steps)) / double(warmup_steps);
  };
}

LrSchedule linear_warmup(LrSchedule schedule, int64_t warmup_steps) {
  SPORE_CHECK(schedule != nullptr, "[linear_warmup] the schedule is empty");
  SPORE_CHECK(warmup_steps >= 0, "[linear_warmup] warmup_steps must be >= 0, got ", warmup_steps);
  return [s = std::move(schedule), warmup_steps](int64_t step) {
    if (step < warmup_steps) return s(0) * double(step + 1) / double(warmup_steps);
    return s(step - warmup_steps);
  };
}

}  // namespace spore::optim
