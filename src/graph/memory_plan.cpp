// The planner (graph/memory_plan.h): liveness intervals [first write, last read] in schedule
// positions, then greedy placement largest-first at the lowest offset that does not overlap any
// already placed buffer whose interval intersects (the classic offset-assignment heuristic that
// MindSpore's SOMAS and ggml's allocator refine). A node's outputs never share memory with its
// inputs (their intervals meet at the node), except the in-place reuse of a dying input by a
// pointwise (kElementwise) node of the same shape and dtype.
#include "graph/memory_plan.h"

#include <algorithm>

namespace spore::graph {
namespace {
struct Block {
  const Value* v;
  size_t bytes;
  int first, last;
  size_t offset = 0;
};

// One block per planned value (planned_values' order) with its liveness interval; index maps a
// value to its block.
std::vector<Block> live_blocks(const Graph& g, std::unordered_map<const Value*, size_t>& index) {
  const int end = int(g.nodes.size());
  std::vector<Block> blocks;
  auto add = [&](const Value* v, int first) {
    index[v] = blocks.size();
    blocks.push_back({v, planned_bytes(*v), first, first});
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
  return blocks;
}

// Whether node i may write its output o over its input in (the in-place rule below): a pointwise
// node, in dying there, same shape, dtype and device.
bool may_write_over(const Node& n, const Value* in, const Value* o) {
  return n.def().has(ops::kElementwise) && !n.is_effect() && n.outputs.size() == 1 &&
         n.outputs[0] == o && in->kind == ValueKind::kComputed && view_base(in) == in &&
         in->shape == o->shape && in->dtype == o->dtype && in->device == o->device;
}
}  // namespace

std::vector<const Value*> planned_values(const Graph& g) {
  std::unordered_map<const Value*, size_t> index;
  std::vector<const Value*> r;
  for (const Block& b : live_blocks(g, index)) r.push_back(b.v);
  return r;
}

MemoryPlan plan_memory(const Graph& g) {
  const int end = int(g.nodes.size());
  std::unordered_map<const Value*, size_t> index;  // value -> block
  std::vector<Block> blocks = live_blocks(g, index);

  // In-place reuse: an elementwise node's output takes the buffer of an input of the same shape
  // and dtype whose life ends at that node (pointwise kernels read element i before writing it,
  // so the alias is safe). Chains (exp(relu(x + y))) then run in one buffer.
  std::vector<size_t> owner(blocks.size());
  for (size_t i = 0; i < owner.size(); ++i) owner[i] = i;
  auto find = [&](size_t b) {
    while (owner[b] != b) b = owner[b];
    return b;
  };
  MemoryPlan plan;
  for (int i = 0; i < end; ++i) {
    const Node& n = *g.nodes[size_t(i)];
    if (!n.def().has(ops::kElementwise) || n.is_effect() || n.outputs.size() != 1) continue;
    const Value* o = n.outputs[0];
    const size_t ob = index.at(o);
    for (const Value* in : n.inputs) {
      auto it = index.find(in);
      if (it == index.end() || !may_write_over(n, in, o)) continue;
      const size_t rb = find(it->second);
      if (blocks[rb].last != i) continue;
      owner[ob] = rb;
      blocks[rb].last = std::max(blocks[rb].last, blocks[ob].last);
      ++plan.inplace;
      break;
    }
  }
  for (const Block& b : blocks) plan.total_bytes += b.bytes;

  std::vector<size_t> order;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (owner[i] == i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;
  for (size_t bi : order) {
    Block& b = blocks[bi];
    std::vector<std::pair<size_t, size_t>> busy;  // [start, end) of overlapping live blocks
    for (size_t pi : placed) {
      const Block& p = blocks[pi];
      if (p.first <= b.last && b.first <= p.last && p.v->device == b.v->device)
        busy.push_back({p.offset, p.offset + p.bytes});
    }
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [s, e] : busy) {
      if (off + b.bytes <= s) break;
      off = std::max(off, e);
    }
    b.offset = off;
    placed.push_back(bi);
    auto arena = std::find_if(plan.arenas.begin(), plan.arenas.end(),
                              [&](const auto& a) { return a.first == b.v->device; });
    if (arena == plan.arenas.end()) arena = plan.arenas.insert(plan.arenas.end(), {b.v->device, 0});
    arena->second = std::max(arena->second, off + b.bytes);
  }
  for (const auto& a : plan.arenas) plan.arena_bytes += a.second;
  for (size_t i = 0; i < blocks.size(); ++i) plan.offset[blocks[i].v] = blocks[find(i)].offset;
  return plan;
}

std::string memory_plan_error(const Graph& g, const MemoryPlan& plan) {
  std::unordered_map<const Value*, size_t> index;
  std::vector<Block> blocks = live_blocks(g, index);
  auto name = [&](const Block& b) {
    return std::string(b.v->producer ? b.v->producer->def().name : "placeholder") + " output " +
           shape_str(b.v->shape);
  };
  for (Block& b : blocks) {
    auto it = plan.offset.find(b.v);
    if (it == plan.offset.end()) return "no offset for a " + name(b);
    b.offset = it->second;
    auto arena = std::find_if(plan.arenas.begin(), plan.arenas.end(),
                              [&](const auto& a) { return a.first == b.v->device; });
    if (arena == plan.arenas.end()) return "no arena for device " + to_string(b.v->device);
    if (b.offset % kArenaAlignment != 0 || b.offset > arena->second ||
        b.bytes > arena->second - b.offset)
      return "the " + name(b) + " (" + std::to_string(b.bytes) + " bytes at offset " +
             std::to_string(b.offset) + ") is not 64-byte aligned inside its " +
             std::to_string(arena->second) + "-byte arena";
  }
  // No arena is larger than its buffers laid end to end (what the planner's placement never
  // exceeds): a stored plan must not make a loader allocate more than the graph can use.
  for (const auto& [device, bytes] : plan.arenas) {
    size_t end_to_end = 0;
    for (const Block& b : blocks)
      if (b.v->device == device) end_to_end += planned_bytes(*b.v);
    if (bytes > end_to_end)
      return "the arena of " + to_string(device) + " holds " + std::to_string(bytes) +
             " bytes, more than its buffers laid end to end (" + std::to_string(end_to_end) + ")";
  }
  // Sweep the buffers by first write; each is checked against those still live then.
  std::vector<size_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].first < blocks[b].first; });
  std::vector<size_t> live;
  for (size_t bi : order) {
    const Block& b = blocks[bi];
    std::erase_if(live, [&](size_t pi) { return blocks[pi].last < b.first; });
    for (size_t pi : live) {
      const Block& p = blocks[pi];
      if (p.v->device != b.v->device || p.offset + p.bytes <= b.offset ||
          b.offset + b.bytes <= p.offset)
        continue;
      // Live at once and sharing bytes: only the in-place rule's exact alias at the node where
      // the input dies and the output is born.
      bool in_place = p.last == b.first && p.offset == b.offset && b.first >= 0;
      if (in_place) {
        const Node& n = *g.nodes[size_t(b.first)];
        in_place = may_write_over(n, p.v, b.v) &&
                   std::find(n.inputs.begin(), n.inputs.end(), p.v) != n.inputs.end();
      }
      if (!in_place)
        return "the " + name(b) + " and the " + name(p) + " are live at once but share bytes";
    }
    live.push_back(bi);
  }
  return "";
}

}  // namespace spore::graph
