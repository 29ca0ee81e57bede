// Launch shapes for the CUDA kernels, host-side arithmetic only (tests/cuda/launch_test.cpp checks
// it without a GPU): a 1-d grid of 256-thread blocks, each thread handling `per_thread` elements,
// capped so a grid-stride loop covers the rest.
#pragma once
#include <algorithm>
#include <cstdint>

namespace spore::cuda {

struct Launch1d {
  unsigned blocks = 1, threads = 256;
};

// n elements, `per_thread` each, at most `max_blocks` blocks (a multiple of the SMs keeps every SM
// busy; the kernels loop with a grid stride beyond that).
inline Launch1d launch_1d(int64_t n, int per_thread = 1, int64_t max_blocks = 132 * 32) {
  Launch1d l;
  const int64_t work = (std::max<int64_t>(n, 1) + per_thread - 1) / per_thread;
  l.blocks = unsigned(std::clamp<int64_t>((work + l.threads - 1) / l.threads, 1, max_blocks));
  return l;
}

// Operands of an elementwise kernel, up to 16 dims after merging (the CPU's limit, so that any
// tensor can be made contiguous): the output's sizes and each operand's strides (in elements; 0
// on a broadcast dim), with dims of size 1 dropped and neighbours merged when every operand is
// contiguous across them (fewer dims: cheaper index arithmetic; the kernels loop over ndim only).
constexpr int kMaxDims = 16;
template <int N>
struct StridedIndex {
  int ndim = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[N][kMaxDims] = {};
};

// sizes: the output's shape; strides[k]: operand k's strides aligned to the output's rank.
template <int N>
bool make_index(const int64_t* sizes, int rank, const int64_t (*strides)[kMaxDims * 2],
                StridedIndex<N>& out) {
  int64_t sz[kMaxDims * 2];
  int64_t st[N][kMaxDims * 2];
  int d = 0;
  for (int i = 0; i < rank; ++i) {
    if (sizes[i] == 1) continue;
    sz[d] = sizes[i];
    for (int k = 0; k < N; ++k) st[k][d] = strides[k][i];
    ++d;
  }
  // Merge dim j into j - 1 (row-major: j is inner) when each operand steps by stride * size.
  int m = 0;
  for (int j = 0; j < d; ++j) {
    bool merge = m > 0;
    for (int k = 0; k < N && merge; ++k) merge = st[k][m - 1] == st[k][j] * sz[j];
    if (merge) {
      sz[m - 1] *= sz[j];
      for (int k = 0; k < N; ++k) st[k][m - 1] = st[k][j];
    } else {
      sz[m] = sz[j];
      for (int k = 0; k < N; ++k) st[k][m] = st[k][j];
      ++m;
    }
  }
  if (m > kMaxDims) return false;
  out.ndim = m;
  for (int j = 0; j < m; ++j) {
    out.size[j] = sz[j];
    for (int k = 0; k < N; ++k) out.stride[k][j] = st[k][j];
  }
  return true;
}

}  // namespace spore::cuda
