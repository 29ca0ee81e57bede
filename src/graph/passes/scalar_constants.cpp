// A 0-d host constant read by a node on another device (`x * 2.0` in a step compiled for the GPU)
// becomes a constant on that device, uploaded once while the graph compiles. Run op by op such a
// scalar joins the device's kernel from the host (the device model's rule) and is copied in at
// every call; in a compiled graph that copy would be one per node and step, and a copy from
// pageable host memory cannot be recorded into a captured step (a CUDA graph). Last in the
// pipeline, after the passes that make or fold constants.
#include <map>
#include <utility>

#include "graph/passes.h"

namespace spore::graph {

size_t place_scalar_constants(Graph& g) {
  std::map<std::pair<const Value*, std::string>, Value*> placed;  // (constant, device) -> copy
  size_t changed = 0;
  for (const auto& node : g.nodes) {
    if (node->device.type == DeviceType::CPU || node->def().has(ops::kTransfer)) continue;
    for (Value*& in : node->inputs) {
      if (!in || in->kind != ValueKind::kConstant || in->device.type != DeviceType::CPU ||
          !in->shape.empty())
        continue;
      Value*& copy = placed[{in, to_string(node->device)}];
      if (!copy) copy = g.add_capture(in->tensor.to(node->device), ValueKind::kConstant);
      in = copy;
      ++changed;
    }
  }
  if (changed > 0) g.remove_unused_inputs();
  return changed;
}

}  // namespace spore::graph
