// verify: the invariant every pass must keep (inputs defined before use, outputs matching the
// op's inference, one device). Run before and after the pipeline.
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {

void verify(const Graph& g) {
  std::unordered_set<const Value*> defined(g.inputs.begin(), g.inputs.end());
  for (const auto& n : g.nodes) {
    const ops::OpDef& def = n->def();
    ops::Metas in;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      SPORE_ASSERT(v && defined.count(v), "graph verify: node ", n->id, " (", def.name, ") input ",
                   i, " is not defined before it");
      SPORE_ASSERT(
          v->device == n->device || (v->shape.empty() && v->device.type == DeviceType::CPU),
          "graph verify: node ", n->id, " (", def.name, ") runs on ", to_string(n->device),
          " but input ", i, " is on ", to_string(v->device));
      in.push_back({v->shape, v->dtype});
    }
    const ops::Metas out = def.rules.infer(in, n->attrs);
    SPORE_ASSERT(out.size() == n->outputs.size(), "graph verify: node ", n->id, " (", def.name,
                 ") has ", n->outputs.size(), " outputs, inference gives ", out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const Value* o = n->outputs[i];
      SPORE_ASSERT(o->producer == n.get() && o->output_nr == int(i), "graph verify: node ", n->id,
                   " output ", i, " has the wrong producer");
      SPORE_ASSERT(o->shape == out[i].shape && o->dtype == out[i].dtype, "graph verify: node ",
                   n->id, " (", def.name, ") output ", i, " is ", dtype_name(o->dtype),
                   shape_str(o->shape), " but inference gives ", dtype_name(out[i].dtype),
                   shape_str(out[i].shape));
      defined.insert(o);
    }
  }
  for (const Value* o : g.outputs)
    SPORE_ASSERT(defined.count(o), "graph verify: an output of graph ", g.name, " is not defined");
}

}  // namespace spore::graph
