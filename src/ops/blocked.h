// Graph mode's blocked activation layout (backends/cpu/passes/blocked_layout.cpp), oneDNN's
// nChw16c: an activation of logical shape (N, C, H, W) held as the ordinary contiguous 5-D tensor
// (N, ceil(C/16), H, W, 16), element [n, cb, h, w, l] = logical [n, cb*16 + l, h, w]. Lanes with
// cb*16 + l >= C are padding: every op that produces a blocked tensor writes zeros there, and
// readers assume only that they are finite. The ops that take blocked operands say so with
// attributes (conv2d*: blocked_x / blocked_y; max_pool2d*, batch_norm*: blocked) or are the
// re-layouts to_blocked / from_blocked (backends/cpu/ops/layout.cpp).
#pragma once
#include "spore/tensor.h"

namespace spore::ops::blocked {

constexpr int64_t kLanes = 16;
inline int64_t blocks(int64_t channels) { return (channels + kLanes - 1) / kLanes; }
// (N, C, H, W) -> (N, ceil(C/16), H, W, 16)
inline Shape shape(const Shape& nchw) {
  return {nchw[0], blocks(nchw[1]), nchw[2], nchw[3], kLanes};
}

}  // namespace spore::ops::blocked
