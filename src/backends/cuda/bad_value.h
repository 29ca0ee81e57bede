// A bad value a kernel found in its input (an index out of range). A kernel cannot throw, so the
// offending threads write a report to their device's page-locked slot (kernels/common.cuh,
// report_bad_value) and leave their output element 0; the host reads the slot whenever it waits
// for the device (a stream, event or device synchronisation: backend.cpp) and throws an
// IndexError naming the op, the value and the bound, as CUDA reports a kernel's fault at the next
// synchronisation. Plain stores, no atomics: racing offenders of one kernel write equally true
// reports.
#pragma once
#include <cstdint>

namespace spore::cuda {

enum BadValueSite : int32_t {
  kNoBadValue = 0,
  kBadGatherIndex,
  kBadIndexSelectIndex,
  kBadScatterAddIndex,
  kBadOneHotIndex,
  kBadCrossEntropyLabel,
};
struct BadValue {
  int64_t value;
  int64_t bound;
  int32_t site;  // a BadValueSite; kNoBadValue while nothing is reported
};

// The device alias of `device`'s report slot, for a kernel's argument (backend.cpp).
BadValue* bad_value_slot(int device);

// Throws the IndexError a kernel on `device` reported since the last check, and clears it.
void raise_bad_value(int device);

}  // namespace spore::cuda
