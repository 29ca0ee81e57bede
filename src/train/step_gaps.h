// How long the device sits idle between training steps, on the device's own clock (timing events
// in the compute stream), for Model's loop: the share of an epoch the accelerator waits for the
// host: for the next batch, or for the host to queue the next step.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "spore/device.h"

namespace spore {
class Event;
}  // namespace spore

namespace spore::train {

class StepGaps {
 public:
  explicit StepGaps(Device device);
  ~StepGaps();
  StepGaps(const StepGaps&) = delete;
  StepGaps& operator=(const StepGaps&) = delete;
  // A mark in the current stream where the device became free: the epoch's start, a step's end.
  void free_from_here();
  // A mark where the device has work again (a step's start): the time since the last free mark
  // counts as idle.
  void busy_from_here();
  // The idle seconds since the last call; waits for the marks recorded so far.
  double take_idle_seconds();

 private:
  std::unique_ptr<Event> mark();  // recorded in the current stream
  void account(size_t keep);      // sums (and frees) the oldest gaps until `keep` are left
  Device device_;
  std::vector<std::unique_ptr<Event>> spare_;
  std::unique_ptr<Event> free_;  // the last free mark, waiting for its busy mark
  std::deque<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>> gaps_;  // (free, busy)
  double idle_ms_ = 0;
};

}  // namespace spore::train
