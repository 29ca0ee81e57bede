// CPU helpers for Graph mode's blocked activations (ops/blocked.h), defined in layout.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spore::cpu {

// Zeros lanes [C % L, L) of the last channel block of a blocked (N, Cb, HW, L) buffer with
// elements of `esize` bytes (the padding every producer of a blocked tensor must write as zero).
// Nothing to do when C is a multiple of L (lanes: 8 or 16).
void zero_blocked_padding(void* data, int64_t N, int64_t C, int64_t HW, size_t esize,
                          int64_t lanes);

}  // namespace spore::cpu
