// Static memory planning: every placeholder and every non-view node output gets a fixed byte
// offset in its device's arena (one per device the graph's values live on), from liveness over
// the schedule (a buffer is free again after its last reader, views extending their base's life),
// so the executor allocates nothing per step.
#pragma once
#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/ir.h"

namespace spore::graph {

struct MemoryPlan {
  std::unordered_map<const Value*, size_t> offset;  // bytes into its device's arena
  std::vector<std::pair<Device, size_t>> arenas;    // each device's arena size (its planned peak)
  size_t arena_bytes = 0;                           // the arenas' sizes added up
  size_t total_bytes = 0;                           // what the same buffers take without reuse
  size_t inplace = 0;  // elementwise outputs written over a dying input
};

constexpr size_t kArenaAlignment = 64;
MemoryPlan plan_memory(const Graph& g);

}  // namespace spore::graph
