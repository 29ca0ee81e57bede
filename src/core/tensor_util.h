// Tensor data-movement helpers for the data pipeline, checkpoints and other host code: row views,
// strided-to-contiguous byte copies and element conversion between dtypes. They touch memory
// directly (no op dispatch, no autograd), so they are safe on pipeline worker threads and cheap per
// row.
#pragma once
#include <cstdint>

#include "spore/tensor.h"

namespace spore::detail {

// Row i of t along dim 0, sharing t's storage: shape t.shape()[1:], no autograd history.
Tensor row_view(const Tensor& t, int64_t i);
// A view of t's storage with a new shape/strides/offset (elements), no autograd history.
Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset);
// Writes t's elements in row-major order into dst (t.nbytes() bytes), whatever t's strides.
void copy_to_buffer(const Tensor& t, void* dst);
// Reads t.nbytes() bytes from src (row-major) into t's elements, whatever t's strides (in place).
void copy_from_buffer(const Tensor& t, const void* src);
// t itself when contiguous, else a contiguous copy (never through the ops library).
Tensor contiguous_copy(const Tensor& t);
// Converts n elements from src (dtype sdt) to dst (dtype ddt); memcpy when the dtypes agree.
void convert_elements(const void* src, DType sdt, void* dst, DType ddt, int64_t n);

}  // namespace spore::detail
