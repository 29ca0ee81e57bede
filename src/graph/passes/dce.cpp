// Dead-code elimination: a node lives when it is an effect (parameter update, moving statistics)
// or one of its outputs is used by a live node or is a graph output. Unused captured inputs go too.
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {

size_t dead_code_elimination(Graph& g) {
  std::unordered_set<const Value*> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = *g.nodes[i];
    bool k = n.is_effect();
    for (const Value* o : n.outputs) k = k || live.count(o);
    if (!k) continue;
    keep[i] = true;
    live.insert(n.inputs.begin(), n.inputs.end());
  }
  size_t removed = 0, j = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (keep[i])
      g.nodes[j++] = std::move(g.nodes[i]);
    else
      ++removed;
  }
  g.nodes.resize(j);
  g.remove_unused_inputs();
  return removed;
}

}  // namespace spore::graph
