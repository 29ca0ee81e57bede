// Static memory planning: every placeholder and every non-view node output gets a fixed byte
// offset in its device's arena (one per device the graph's values live on), from liveness over
// the schedule (a buffer is free again after its last reader, views extending their base's life),
// so the executor allocates nothing per step.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
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
// The bytes a planned value takes in its arena (its size, at least 1, rounded up to the alignment).
inline size_t planned_bytes(const Value& v) {
  const size_t n = std::max<size_t>(v.nbytes(), 1);
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}
MemoryPlan plan_memory(const Graph& g);

// The values a plan places, in a fixed order: the placeholders (graph inputs order), then every
// non-view node output (schedule order). A compiled model file stores the offsets in this order.
std::vector<const Value*> planned_values(const Graph& g);
// Why `plan` is not a safe plan of g, or "" when it is: every planned value has a 64-byte aligned
// offset whose buffer fits its device's arena, and no two buffers that are live at once share a
// byte, except where plan_memory makes them (a pointwise node's output written over an input
// that dies at that node, same shape and dtype). How a plan read from a file is checked before
// the executor trusts it.
std::string memory_plan_error(const Graph& g, const MemoryPlan& plan);

}  // namespace spore::graph
