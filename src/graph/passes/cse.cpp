// Common-subexpression elimination: a node with the same op, attributes and inputs as an earlier
// one reuses its outputs. Effects and random ops are never merged, nor nodes reading a value some
// effect mutates (the two reads may see different data). Constants with the same dtype, shape,
// strides and bytes (the engine's many zero cotangents) are merged first.
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {
namespace {
bool same_constant(const Value* a, const Value* b) {
  if (a->dtype != b->dtype || a->shape != b->shape || a->strides != b->strides) return false;
  if (!a->tensor.is_contiguous() || a->device != b->device) return false;
  // Compared on the host (a constant may live on any device; constants are small).
  const Tensor ha = a->tensor.cpu(), hb = b->tensor.cpu();
  return std::memcmp(ha.data_ptr(), hb.data_ptr(), a->nbytes()) == 0;
}
}  // namespace

size_t common_subexpression_elimination(Graph& g) {
  size_t merged = 0;
  // Constants.
  std::vector<Value*> consts;
  for (Value* v : g.inputs) {
    if (v->kind != ValueKind::kConstant) continue;
    Value* same = nullptr;
    for (Value* c : consts)
      if (same_constant(c, v)) same = c;
    if (same) {
      g.replace_all_uses(v, same);
      ++merged;
    } else {
      consts.push_back(v);
    }
  }
  g.remove_unused_inputs();

  // Nodes.
  const auto mutated_list = mutated_values(g);
  const std::unordered_set<const Value*> mutated(mutated_list.begin(), mutated_list.end());
  std::unordered_multimap<size_t, Node*> seen;
  std::unordered_set<Node*> dead;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (n->is_effect() || n->def().has(ops::kRandom) || n->outputs.empty()) continue;
    bool reads_mutated = false;
    for (const Value* in : n->inputs) reads_mutated = reads_mutated || mutated.count(view_base(in));
    if (reads_mutated) continue;
    size_t h = size_t(n->op) * 31 + n->attrs.hash();
    for (const Value* in : n->inputs) h = h * 1000003u ^ std::hash<const void*>()(in);
    Node* match = nullptr;
    auto range = seen.equal_range(h);
    for (auto it = range.first; it != range.second && !match; ++it) {
      Node* m = it->second;
      if (m->op == n->op && m->inputs == n->inputs && m->attrs == n->attrs) match = m;
    }
    if (!match) {
      seen.emplace(h, n);
      continue;
    }
    for (size_t i = 0; i < n->outputs.size(); ++i)
      g.replace_all_uses(n->outputs[i], match->outputs[i]);
    dead.insert(n);
    ++merged;
  }
  std::erase_if(g.nodes, [&](const auto& n) { return dead.count(n.get()) > 0; });
  return merged;
}

}  // namespace spore::graph
