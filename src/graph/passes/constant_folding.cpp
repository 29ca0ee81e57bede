// Constant folding: a node whose inputs are all constants (tensors only the graph can see, such as
// the engine's zero cotangents and ones seeds) runs once now, through the ordinary dispatcher, and
// its outputs become constants. Effects, random ops and outputs above kMaxBytes are left alone.
#include <unordered_set>

#include "graph/passes.h"
#include "spore/autograd.h"

namespace spore::graph {
namespace {
constexpr size_t kMaxBytes = size_t(16) << 20;  // a folded constant stays resident: keep them small
}

size_t constant_folding(Graph& g) {
  SPORE_ASSERT(ops::trace_hook() == nullptr, "constant_folding must run outside tracing");
  NoGradGuard no_grad;
  size_t folded = 0;
  std::unordered_set<Node*> dead;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (n->is_effect() || n->def().has(ops::kRandom) || n->outputs.empty()) continue;
    bool all_const = true;
    size_t bytes = 0;
    for (const Value* in : n->inputs) all_const = all_const && in->kind == ValueKind::kConstant;
    for (const Value* o : n->outputs) bytes += o->nbytes();
    if (!all_const || bytes > kMaxBytes) continue;
    ops::Tensors ins;
    for (const Value* in : n->inputs) ins.push_back(in->tensor);
    ops::Tensors outs = ops::call(n->op, ins, n->attrs);
    for (size_t i = 0; i < outs.size(); ++i) {
      Value* c = g.add_capture(outs[i].detach(), ValueKind::kConstant);
      g.replace_all_uses(n->outputs[i], c);
    }
    dead.insert(n);
    ++folded;
  }
  std::erase_if(g.nodes, [&](const auto& n) { return dead.count(n.get()) > 0; });
  g.remove_unused_inputs();
  return folded;
}

}  // namespace spore::graph
