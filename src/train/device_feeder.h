// The rows of a dataset (host tensors from the data engine) moved to the network's device one row
// ahead, for Model's loops (docs/training.md, "On a device").
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "spore/data/dataset.h"

namespace spore {
class Event;
class Stream;
}  // namespace spore

namespace spore::train {

// On the CPU it hands the rows through. On a device, each row is staged in page-locked host memory
// (a copy from pageable memory would make the host wait until the device reaches it) and copied
// on a copy stream of its own while the previous step computes; the step waits for its row on the
// device (an event), the host never does. Two staging buffers per column alternate; one is written
// again only after its copy, a row earlier, has run.
class DeviceFeeder {
 public:
  DeviceFeeder(std::unique_ptr<data::Iterator> it, Device device);
  ~DeviceFeeder();
  DeviceFeeder(const DeviceFeeder&) = delete;
  DeviceFeeder& operator=(const DeviceFeeder&) = delete;
  // The next row, on the device; its copy is ordered before the work queued after this call.
  std::optional<data::Row> next();

 private:
  struct Staging {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  struct Slot {
    std::vector<Staging> columns;
    std::unique_ptr<Event> copied;  // recorded on the copy stream after the row's copies
  };
  std::optional<data::Row> fetch();

  std::unique_ptr<data::Iterator> it_;
  Device device_;
  std::unique_ptr<Stream> copy_stream_;  // null on the CPU
  std::unique_ptr<Event> queued_;        // the compute stream's work up to a fetch
  std::array<Slot, 2> slots_;
  int ahead_slot_ = 0;  // the slot of the row fetched ahead
  std::optional<data::Row> ahead_;
};

}  // namespace spore::train
