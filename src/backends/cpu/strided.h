// Strided iteration for CPU kernels: N operands viewed over one iteration shape with per-operand
// element strides (0 where an operand is broadcast). Adjacent dims that are contiguous for every
// operand are merged, so the common cases reduce to one long inner loop, which the kernel
// vectorises when its inner strides are 1 (or 0 for a broadcast scalar).
#pragma once
#include <array>
#include <cstdint>

#include "core/parallel.h"
#include "spore/tensor.h"

namespace spore::cpu {

inline constexpr int kMaxDims = 16;

template <int N>
struct StridedIter {
  int ndim = 0;  // after merging; sizes[ndim-1] is the inner loop
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  int64_t numel = 1;
  int64_t inner() const { return ndim ? sizes[ndim - 1] : 1; }
};

// Strides of t broadcast (right-aligned) to `shape`; 0 on broadcast dims.
inline Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  const size_t off = shape.size() - size_t(t.dim());
  for (size_t i = 0; i < size_t(t.dim()); ++i) st[off + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

template <int N>
StridedIter<N> make_iter(const Shape& shape, const std::array<Shape, N>& strides) {
  StridedIter<N> it;
  SPORE_CHECK(shape.size() <= size_t(kMaxDims), "tensors of rank > ", kMaxDims,
              " are not supported");
  for (size_t d = 0; d < shape.size(); ++d) {
    it.numel *= shape[d];
    if (shape[d] == 1) continue;  // size-1 dims never move a pointer
    bool merge = it.ndim > 0;
    for (int k = 0; k < N && merge; ++k)
      merge = strides[k][d] * shape[d] == it.strides[k][it.ndim - 1];
    if (merge) {
      it.sizes[it.ndim - 1] *= shape[d];
      for (int k = 0; k < N; ++k) it.strides[k][it.ndim - 1] = strides[k][d];
    } else {
      it.sizes[it.ndim] = shape[d];
      for (int k = 0; k < N; ++k) it.strides[k][it.ndim] = strides[k][d];
      ++it.ndim;
    }
  }
  return it;
}

// Calls inner(offsets, n, inner_strides) for every inner row; offsets are element offsets per
// operand. Rows are split across threads when there is enough work.
template <int N, typename F>
void for_each_row(const StridedIter<N>& it, F&& inner, int64_t grain_elems = 32768) {
  if (it.numel == 0) return;
  const int64_t n_inner = it.inner();
  const int64_t rows = it.numel / n_inner;
  std::array<int64_t, N> inner_st{};
  for (int k = 0; k < N; ++k) inner_st[k] = it.ndim ? it.strides[k][it.ndim - 1] : 0;
  auto run = [&](int64_t r0, int64_t r1) {
    int64_t idx[kMaxDims] = {0};
    std::array<int64_t, N> off{};
    int64_t r = r0;  // unravel r0 over the outer dims
    for (int d = it.ndim - 2; d >= 0; --d) {
      idx[d] = r % it.sizes[d];
      r /= it.sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx[d] * it.strides[k][d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      inner(off, n_inner, inner_st);
      for (int d = it.ndim - 2; d >= 0; --d) {  // odometer increment
        ++idx[d];
        for (int k = 0; k < N; ++k) off[k] += it.strides[k][d];
        if (idx[d] < it.sizes[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= idx[d] * it.strides[k][d];
        idx[d] = 0;
      }
    }
  };
  const int nthreads = get_num_threads();
  if (rows < nthreads && n_inner >= 2 * grain_elems) {
    // Few long rows (a big contiguous tensor): split each row into pieces instead.
    const int64_t parts = (nthreads + rows - 1) / rows;
    const int64_t piece = (n_inner + parts - 1) / parts;
    parallel_for(0, rows * parts, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t row = t / parts, p0 = (t % parts) * piece,
                      len = std::min(piece, n_inner - p0);
        if (len <= 0) continue;
        std::array<int64_t, N> off{};
        int64_t r = row;
        for (int d = it.ndim - 2; d >= 0; --d) {
          for (int k = 0; k < N; ++k) off[k] += (r % it.sizes[d]) * it.strides[k][d];
          r /= it.sizes[d];
        }
        for (int k = 0; k < N; ++k) off[k] += p0 * inner_st[k];
        inner(off, len, inner_st);
      }
    });
    return;
  }
  const int64_t grain_rows = std::max<int64_t>(1, grain_elems / std::max<int64_t>(n_inner, 1));
  parallel_for(0, rows, grain_rows, run);
}

// Half and bfloat16 are stored narrow and computed in float.
template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
using float_calc_t = std::conditional_t<is_half_v<T>, float, T>;

// Typed base pointer of a tensor's view (element 0).
template <typename T>
T* base(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

}  // namespace spore::cpu
