// Recompute (graph/passes.h): the backward nodes' reads of activations made inside a recompute
// cell (Cell::recompute(), RecomputeScope) are pointed at copies of the cell's forward nodes,
// inserted just before the first backward node that needs them. The originals then die in the
// forward pass, so the memory plan no longer holds them until the backward pass: only the cell's
// inputs (produced outside it) are kept, the checkpoints.
#include <functional>
#include <unordered_map>

#include "graph/passes.h"

namespace spore::graph {
namespace {

// A forward node whose outputs may be recomputed: marked, pure (no effects), deterministic.
bool recomputable(const Node* n) {
  return n && n->recompute_scope != 0 && !n->backward && !n->is_effect() &&
         !n->def().has(ops::kRandom);
}

}  // namespace

size_t recompute(Graph& g) {
  bool any = false;
  for (const auto& n : g.nodes) any = any || recomputable(n.get());
  if (!any) return 0;
  std::unordered_map<const Value*, Value*> copy_of;  // original activation -> its recomputed copy
  size_t copies = 0;
  // Copies v's producer (and, first, the producers of its inputs in the same scope) before `pos`,
  // advancing pos past what it inserts. Values from outside the scope are read as they are.
  std::function<Value*(Value*, size_t&)> recomputed = [&](Value* v, size_t& pos) -> Value* {
    Node* p = v->producer;
    if (!recomputable(p)) return v;
    if (auto it = copy_of.find(v); it != copy_of.end()) return it->second;
    std::vector<Value*> ins;
    for (Value* in : p->inputs) {
      Value* c = in;
      if (in->producer && in->producer->recompute_scope == p->recompute_scope)
        c = recomputed(in, pos);
      ins.push_back(c);
    }
    ops::Metas metas;
    for (const Value* o : p->outputs) metas.push_back({o->shape, o->dtype});
    Node* c = g.insert_node(pos++, p->op, ins, p->attrs, metas);
    c->precision = p->precision;
    for (size_t k = 0; k < p->outputs.size(); ++k) {
      // Views keep their layout (strides, offset), as the original's.
      c->outputs[k]->strides = p->outputs[k]->strides;
      c->outputs[k]->offset = p->outputs[k]->offset;
      copy_of[p->outputs[k]] = c->outputs[k];
    }
    ++copies;
    return copy_of[v];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    if (!n->backward) continue;
    size_t pos = i;  // copies go right before this node
    for (Value*& in : n->inputs)
      if (recomputable(in->producer)) in = recomputed(in, pos);
    i = pos;  // n moved to pos
  }
  return copies;
}

}  // namespace spore::graph
