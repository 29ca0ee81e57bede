// Graph mode's blocked activation layout (backends/cpu/passes/blocked_layout.cpp), oneDNN's
// nChw16c or nChw8c: an activation of logical shape (N, C, H, W) held as the ordinary contiguous
// 5-D tensor (N, ceil(C/L), H, W, L), element [n, cb, h, w, l] = logical [n, cb*L + l, h, w]. The
// lane count L is the last dimension: 16 where the CPU backend runs AVX-512 kernels, 8 on AVX2 (the
// channel block oneDNN's kernels use on that ISA; backends/cpu/isa.h picks it), so every op reads
// L from its blocked operand's shape (conv2d*, to_blocked: a `lanes` attribute, default 16). Lanes
// with cb*L + l >= C are padding: every op that produces a blocked tensor writes zeros there, and
// readers assume only that they are finite. The ops that take blocked operands say so with
// attributes (conv2d*: blocked_x / blocked_y; max_pool2d*, batch_norm*: blocked) or are the
// re-layouts to_blocked / from_blocked (backends/cpu/ops/layout.cpp).
#pragma once
#include "spore/tensor.h"

namespace spore::ops::blocked {

constexpr int64_t kLanes = 16;  // the default (and the AVX-512 width)
inline bool valid_lanes(int64_t lanes) { return lanes == 8 || lanes == 16; }
inline int64_t blocks(int64_t channels, int64_t lanes = kLanes) {
  return (channels + lanes - 1) / lanes;
}
// (N, C, H, W) -> (N, ceil(C/L), H, W, L)
inline Shape shape(const Shape& nchw, int64_t lanes = kLanes) {
  return {nchw[0], blocks(nchw[1], lanes), nchw[2], nchw[3], lanes};
}
// The lanes of a blocked shape (its last dimension), 0 when it is not (N, Cb, H, W, 8|16).
inline int64_t lanes_of(const Shape& s) { return s.size() == 5 && valid_lanes(s[4]) ? s[4] : 0; }

}  // namespace spore::ops::blocked
