#include "train/step_gaps.h"

#include "backends/backend.h"

namespace spore::train {

// Gaps older than this many steps have run: their marks are read then without waiting.
constexpr size_t kOpenGaps = 8;

StepGaps::StepGaps(Device device) : device_(device) {}
StepGaps::~StepGaps() = default;

std::unique_ptr<Event> StepGaps::mark() {
  std::unique_ptr<Event> e;
  if (spare_.empty()) {
    e = get_backend(device_.type).new_timing_event(device_.index);
  } else {
    e = std::move(spare_.back());
    spare_.pop_back();
  }
  e->record(current_stream(device_));
  return e;
}

void StepGaps::free_from_here() {
  if (free_) spare_.push_back(std::move(free_));
  free_ = mark();
}

void StepGaps::busy_from_here() {
  if (!free_) return;  // nothing ran before: no gap to measure
  gaps_.emplace_back(std::move(free_), mark());
  account(kOpenGaps);
}

void StepGaps::account(size_t keep) {
  while (gaps_.size() > keep) {
    auto& [from, to] = gaps_.front();
    to->synchronize();
    idle_ms_ += std::max(0.0, to->ms_since(*from));
    spare_.push_back(std::move(from));
    spare_.push_back(std::move(to));
    gaps_.pop_front();
  }
}

double StepGaps::take_idle_seconds() {
  account(0);
  const double s = idle_ms_ / 1e3;
  idle_ms_ = 0;
  return s;
}

}  // namespace spore::train
