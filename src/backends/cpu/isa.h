// The vector ISA the CPU backend runs, one decision for the whole backend: oneDNN's effective ISA
// (the CPU's best, capped by ONEDNN_MAX_CPU_ISA) sets it, and the project's Highway kernels follow
// (their targets above it are disabled), so ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine runs
// the whole backend as an AVX2 machine would: the way to measure both ISAs on one machine
// (bench/peers/graph_train.sh ISA=avx2; docs/performance.md).
//
// blocked_lanes() is Graph mode's channel block (ops/blocked.h), the one oneDNN's convolutions use
// on that ISA: 16 (nChw16c) on AVX-512, 8 (nChw8c) on AVX2 and below, so the blocked tensors the
// layout pass makes are the ones the convolutions read and write, with no reorder between them.
// SPORE_BLOCKED_LANES=8|16 overrides the choice (tests of the other width; A/B runs).
#pragma once
#include <cstdint>
#include <string>

namespace spore::cpu {

struct CpuIsa {
  std::string onednn;           // oneDNN's effective ISA: "avx512_core", "avx2", ...
  std::string highway;          // Highway's best target after the cap: "AVX3", "AVX2", ...
  int64_t highway_targets = 0;  // Highway's targets after the cap (the dispatch's list)
  bool avx512 = false;          // oneDNN runs its AVX-512 kernels
  int64_t lanes = 16;           // blocked_lanes()
  bool lanes_forced = false;    // by SPORE_BLOCKED_LANES
  std::string str() const;      // "oneDNN avx2, Highway AVX2, blocked layout nChw8c"
};

// Decided once per process, at the CPU backend's start (applies the Highway cap then).
const CpuIsa& cpu_isa();
// The lanes the layout pass uses now: cpu_isa().lanes unless a scope overrides it (tests that
// compile one graph under both widths).
int64_t blocked_lanes();
class ScopedBlockedLanes {
 public:
  explicit ScopedBlockedLanes(int64_t lanes);  // 8 or 16
  ~ScopedBlockedLanes();
  ScopedBlockedLanes(const ScopedBlockedLanes&) = delete;
  ScopedBlockedLanes& operator=(const ScopedBlockedLanes&) = delete;

 private:
  int64_t old_;
};

}  // namespace spore::cpu
