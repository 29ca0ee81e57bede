#include "train/device_feeder.h"

#include <cstring>

#include "backends/backend.h"

namespace spore::train {

DeviceFeeder::DeviceFeeder(std::unique_ptr<data::Iterator> it, Device device)
    : it_(std::move(it)), device_(device) {
  if (device_.type != DeviceType::CPU) {
    Backend& b = get_backend(device_.type);
    copy_stream_ = b.new_stream(device_.index);
    queued_ = b.new_event(device_.index);
    for (Slot& s : slots_) s.copied = b.new_event(device_.index);
  }
  ahead_ = fetch();
}

DeviceFeeder::~DeviceFeeder() {
  if (!copy_stream_) return;
  Allocator& pinned = get_backend(device_.type).pinned_allocator();
  for (Slot& s : slots_) {
    s.copied->synchronize();  // no copy still reads the staging memory
    for (const Staging& c : s.columns)
      if (c.ptr) pinned.deallocate(c.ptr, c.bytes);
  }
}

std::optional<data::Row> DeviceFeeder::next() {
  std::optional<data::Row> row = std::move(ahead_);
  if (!row) return row;
  // The work queued from here on (the step) waits for this row's copies, on the device.
  if (copy_stream_) slots_[size_t(ahead_slot_)].copied->wait(current_stream(device_));
  ahead_ = fetch();
  return row;
}

std::optional<data::Row> DeviceFeeder::fetch() {
  std::optional<data::Row> host = it_->next();
  if (!host || !copy_stream_) return host;
  Backend& b = get_backend(device_.type);
  ahead_slot_ ^= 1;
  Slot& slot = slots_[size_t(ahead_slot_)];
  slot.copied->synchronize();  // this slot's previous copies (two rows ago) have run
  slot.columns.resize(host->size());
  // The device tensors come from the compute stream's pool; blocks it freed may still be read by
  // the work queued so far, so the copy stream starts after that work (queued_), which the copies
  // then overlap with nothing but the steps queued after this call.
  data::Row moved(host->size());
  std::vector<Tensor> sources(host->size());
  for (size_t c = 0; c < host->size(); ++c) {
    const Tensor& t = (*host)[c];
    if (!t.defined()) continue;
    sources[c] = t.contiguous();
    moved[c] = Tensor::empty(t.shape(), t.dtype(), device_);
  }
  queued_->record(current_stream(device_));
  queued_->wait(*copy_stream_);
  Allocator& pinned = b.pinned_allocator();
  for (size_t c = 0; c < host->size(); ++c) {
    if (!sources[c].defined()) {
      moved[c] = (*host)[c];
      continue;
    }
    const size_t n = sources[c].nbytes();
    Staging& s = slot.columns[c];
    if (s.bytes < n) {
      if (s.ptr) pinned.deallocate(s.ptr, s.bytes);
      s.ptr = pinned.allocate(n);
      s.bytes = n;
    }
    if (n == 0) continue;
    std::memcpy(s.ptr, sources[c].data_ptr(), n);
    b.copy_async(moved[c].data_ptr(), device_, s.ptr, Device{}, n, *copy_stream_);
  }
  slot.copied->record(*copy_stream_);
  return moved;
}

}  // namespace spore::train
