// The test device (backend.cpp beside this says what it is). Test programs call
// enable_test_device() before using Device{DeviceType::Test, 0}.
#pragma once
#include <atomic>
#include <cstdint>

namespace spore {

void enable_test_device();

// Copies through the test backend since start (or the last reset), by direction.
struct TransferCounts {
  // [src on Test * 2 + dst on Test]: [1] host -> device, [2] device -> host, [3] device -> device.
  std::atomic<uint64_t> count[4]{};
  uint64_t host_to_device() const { return count[1]; }
  uint64_t device_to_host() const { return count[2]; }
  uint64_t device_to_device() const { return count[3]; }
  void reset() {
    for (auto& c : count) c = 0;
  }
};
TransferCounts& test_device_copies();
// Set: the next end_capture on the test device fails (returns nullptr with a reason), as a CUDA
// capture does when a kernel synchronises with the host; then it is cleared.
bool& fail_next_capture();

}  // namespace spore
