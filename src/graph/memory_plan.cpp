// The planner (graph/memory_plan.h): liveness intervals [first write, last read] in schedule
// positions, then greedy placement largest-first at the lowest offset that does not overlap any
// already placed buffer whose interval intersects (the classic offset-assignment heuristic that
// MindSpore's SOMAS and ggml's allocator refine). A node's outputs never share memory with its
// inputs (their intervals meet at the node), so kernels need not support aliasing.
#include "graph/memory_plan.h"

#include <algorithm>

namespace spore::graph {
namespace {
size_t align_up(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

struct Block {
  const Value* v;
  size_t bytes;
  int first, last;
  size_t offset = 0;
};
}  // namespace

MemoryPlan plan_memory(const Graph& g) {
  const int end = int(g.nodes.size());
  std::unordered_map<const Value*, size_t> index;  // value -> block
  std::vector<Block> blocks;
  auto add = [&](const Value* v, int first) {
    index[v] = blocks.size();
    blocks.push_back({v, align_up(std::max<size_t>(v->nbytes(), 1)), first, first});
  };
  for (const Value* v : g.inputs)
    if (v->kind == ValueKind::kPlaceholder) add(v, -1);
  // Placeholders are written before the first node and kept to the end (cheap, and the caller's
  // data is then never overwritten mid-step).
  for (int i = 0; i < end; ++i) {
    const Node& n = *g.nodes[size_t(i)];
    for (const Value* in : n.inputs) {
      const Value* base = view_base(in);
      auto it = index.find(base);
      if (it != index.end()) blocks[it->second].last = std::max(blocks[it->second].last, i);
    }
    if (!n.is_view())
      for (const Value* o : n.outputs) add(o, i);
  }
  for (Block& b : blocks)
    if (b.v->kind == ValueKind::kPlaceholder) b.last = end;
  for (const Value* o : g.outputs) {
    auto it = index.find(view_base(o));
    if (it != index.end()) blocks[it->second].last = end;
  }

  std::vector<size_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;
  MemoryPlan plan;
  for (size_t bi : order) {
    Block& b = blocks[bi];
    std::vector<std::pair<size_t, size_t>> busy;  // [start, end) of overlapping live blocks
    for (size_t pi : placed) {
      const Block& p = blocks[pi];
      if (p.first <= b.last && b.first <= p.last) busy.push_back({p.offset, p.offset + p.bytes});
    }
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [s, e] : busy) {
      if (off + b.bytes <= s) break;
      off = std::max(off, e);
    }
    b.offset = off;
    placed.push_back(bi);
    plan.offset[b.v] = off;
    plan.arena_bytes = std::max(plan.arena_bytes, off + b.bytes);
    plan.total_bytes += b.bytes;
  }
  return plan;
}

}  // namespace spore::graph
