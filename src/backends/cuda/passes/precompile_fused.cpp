// Graph compile time on the GPU, with SPORE_CUDA_FUSED=nvrtc (docs/cuda.md): every
// FusedElementwise node on a GPU gets its generated kernel compiled (NVRTC, or the disk cache) and
// loaded for the layout its values will have, after the fusion passes made the nodes. So the first
// step does not pay the compiler and a compile error surfaces while the graph compiles. A node
// whose values turn out to have other strides at run time gets its kernel then. The graph is not
// changed.
#include "backends/cuda/kernels/fused_generated.h"
#include "graph/ir.h"
#include "graph/passes.h"

namespace spore::cuda {
namespace {

constexpr int kOrderPrecompileFused = 900;  // after every fusion pass

size_t precompile_fused_kernels(graph::Graph& g) {
  if (!fused_generated_enabled()) return 0;
  for (const auto& node : g.nodes) {
    if (node->op != ops::OpId::FusedElementwise || node->device.type != DeviceType::GPU ||
        node->outputs.size() != 1)
      continue;
    std::vector<DType> dtypes;
    std::vector<Shape> shapes, strides;
    for (const graph::Value* v : node->inputs) {
      dtypes.push_back(v->dtype);
      shapes.push_back(v->shape);
      strides.push_back(v->strides);
    }
    const graph::Value* out = node->outputs[0];
    precompile_fused(node->attrs, out->dtype, out->shape, dtypes, shapes, strides,
                     node->device.index);
  }
  return 0;
}

}  // namespace

SPORE_REGISTER_PASS(GPU, "precompile_fused_kernels", kOrderPrecompileFused,
                    precompile_fused_kernels);

}  // namespace spore::cuda
