// How a reduction is laid out on the GPU, host-side arithmetic only (tests/cuda/launch_test.cpp
// checks it without a GPU). The input is seen as kept dims (the output's, row-major) and reduced
// dims, each merged where the strides allow and with size-1 dims dropped, as the CPU plans it.
//   warp mode    the innermost reduced dim is the input's fastest (sum over the last axis): one
//                warp per output walks the reduced elements, its lanes reading neighbours
//   thread mode  otherwise (sum over the batch of (N, C)): one thread per output, neighbouring
//                threads reading neighbouring outputs' elements
// When there are too few outputs to fill the GPU, the reduced range is split into `split` chunks,
// each reduced to a partial, and a second kernel merges each output's partials (two passes, no
// atomics: the result does not depend on timing).
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace spore::cuda {

constexpr int kReduceMaxDims = 8;

struct ReducePlan {
  int nkeep = 0, nred = 0;
  int64_t keep_size[kReduceMaxDims] = {}, keep_stride[kReduceMaxDims] = {};
  int64_t red_size[kReduceMaxDims] = {}, red_stride[kReduceMaxDims] = {};
  int64_t nout = 1, count = 1;  // outputs; reduced elements per output
  bool warp = true;             // warp mode (else thread mode)
  int64_t split = 1;            // chunks of the reduced range per output
  int64_t chunk = 1;            // reduced elements per chunk (count / split, rounded up)
};

// shape/strides of the input, red[d]: dim d is reduced. False when more than kReduceMaxDims kept
// or reduced dims remain after merging.
inline bool make_reduce_plan(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                             const std::vector<bool>& red, ReducePlan& p) {
  std::vector<std::pair<int64_t, int64_t>> keep, reduce;  // (size, stride)
  p.nout = 1;
  p.count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    (red[d] ? p.count : p.nout) *= shape[d];
    if (shape[d] == 1) continue;
    auto& dims = red[d] ? reduce : keep;
    dims.push_back({shape[d], strides[d]});
  }
  // Kept dims keep the output's order; merge neighbours that step contiguously.
  std::vector<std::pair<int64_t, int64_t>> k;
  for (const auto& [n, st] : keep) {
    if (!k.empty() && k.back().second == st * n) {
      k.back().first *= n;
      k.back().second = st;
    } else {
      k.push_back({n, st});
    }
  }
  // Reduced dims in any order: outermost (largest stride) first, then merged.
  std::stable_sort(reduce.begin(), reduce.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::pair<int64_t, int64_t>> r;
  for (const auto& [n, st] : reduce) {
    if (!r.empty() && r.back().second == st * n) {
      r.back().first *= n;
      r.back().second = st;
    } else {
      r.push_back({n, st});
    }
  }
  if (k.size() > size_t(kReduceMaxDims) || r.size() > size_t(kReduceMaxDims)) return false;
  p.nkeep = int(k.size());
  p.nred = int(r.size());
  for (int i = 0; i < p.nkeep; ++i)
    p.keep_size[i] = k[size_t(i)].first, p.keep_stride[i] = k[size_t(i)].second;
  for (int i = 0; i < p.nred; ++i)
    p.red_size[i] = r[size_t(i)].first, p.red_stride[i] = r[size_t(i)].second;
  // Warp mode when the reduction's innermost stride is below every kept stride (or nothing is
  // kept).
  const int64_t rs = p.nred ? p.red_stride[p.nred - 1] : 1;
  const int64_t ks = p.nkeep ? p.keep_stride[p.nkeep - 1] : INT64_MAX;
  p.warp = p.nred == 0 || rs < ks || p.nkeep == 0;
  return true;
}

// Picks the split of the reduced range: enough work items (warps or threads) to fill `sms`
// multiprocessors, chunks of at least `min_chunk` elements.
inline void choose_split(ReducePlan& p, int sms, int64_t min_chunk = 2048) {
  const int64_t want =
      p.warp ? int64_t(sms) * 32 : int64_t(sms) * 1024;  // warps / threads in flight
  int64_t split = 1;
  if (p.nout < want && p.count > min_chunk)
    split = std::clamp<int64_t>(want / std::max<int64_t>(p.nout, 1), 1,
                                (p.count + min_chunk - 1) / min_chunk);
  p.split = split;
  p.chunk = (p.count + split - 1) / split;
  p.split = p.count ? (p.count + p.chunk - 1) / p.chunk : 1;  // no empty chunk
}

}  // namespace spore::cuda
