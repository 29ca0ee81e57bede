// Static memory planning: every placeholder and every non-view node output gets a fixed byte
// offset in one arena, from liveness over the schedule (a buffer is free again after its last
// reader, views extending their base's life), so the executor allocates nothing per step.
#pragma once
#include <cstddef>
#include <unordered_map>

#include "graph/ir.h"

namespace spore::graph {

struct MemoryPlan {
  std::unordered_map<const Value*, size_t> offset;  // bytes into the arena
  size_t arena_bytes = 0;                           // the planned peak: the arena's size
  size_t total_bytes = 0;                           // what the same buffers take without reuse
  size_t inplace = 0;  // elementwise outputs written over a dying input
};

constexpr size_t kArenaAlignment = 64;
MemoryPlan plan_memory(const Graph& g);

}  // namespace spore::graph
