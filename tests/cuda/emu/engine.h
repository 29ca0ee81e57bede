// The CUDA emulator's execution engine (docs/cuda.md, "The emulator"): runs a kernel's grid on the
// host, one block at a time, each of the block's threads a fiber of its own, so that
// __syncthreads and warp shuffles behave as on a GPU: a thread that reaches a barrier waits there
// until every live thread of its block (its warp, for a shuffle) has reached it. Threads that
// disagree on barriers, or a full-mask shuffle missing a lane, are reported as the launch's error
// (a real GPU hangs or gives undefined values there).
#pragma once
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace spore::emu {

// What a running emulated thread sees as threadIdx / blockIdx / blockDim / gridDim.
struct ThreadCtx {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1};
  dim3 grid_dim{1, 1, 1};
};
// The running thread's indices (valid inside a kernel only).
const ThreadCtx& thread();

// Runs body as every thread of a grid of `grid` blocks of `block` threads. Returns false and sets
// *error when the threads broke a barrier rule (the rest of the grid is not run). One grid at a
// time in the process: the caller serialises (the runtime's lock).
bool run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body,
              std::string* error);

// __syncthreads and its voting forms (kind: 0 plain, 1 or, 2 and, 3 count).
int sync_block(int kind, int predicate);

// A warp shuffle of up to 8 bytes: returns the value lane `src` (computed per mode from the
// caller's lane) passed in.
enum class Shuffle { kIdx, kUp, kDown, kXor };
uint64_t shuffle(uint64_t bits, Shuffle mode, int arg, int width);

}  // namespace spore::emu
