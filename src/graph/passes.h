// The generic graph passes: each a graph -> graph function in its own file under passes/,
// returning how many nodes it changed or removed. To add one: declare it here, write
// passes/<name>.cpp, add it to the pipeline in passes/pipeline.cpp and a test in tests/graph/.
// Passes that only make sense on one backend (oneDNN post-ops, blocked layouts) live in that
// backend's folder (backends/<name>/passes/) and join the pipeline through SPORE_REGISTER_PASS.
#pragma once
#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/ir.h"

namespace spore::graph {

// ---- helpers of the chain fusions (a producer and its single readers) ---------------------------
// Reads of each value by nodes (with repeats) and by the graph's outputs, and its last reader.
struct Uses {
  std::unordered_map<const Value*, int> count;
  std::unordered_map<const Value*, Node*> reader;
  explicit Uses(const Graph& g) {
    for (const auto& n : g.nodes)
      for (const Value* in : n->inputs) {
        ++count[in];
        reader[in] = n.get();
      }
    for (const Value* o : g.outputs) count[o] += 2;  // never "single"
  }
  // The one node reading v once, or null.
  Node* single(const Value* v) const {
    auto it = count.find(v);
    return it != count.end() && it->second == 1 ? reader.at(v) : nullptr;
  }
};
inline bool same_meta(const Value* a, const Value* b) {
  return a->shape == b->shape && a->dtype == b->dtype;
}
// Whether an effect (an in-place update) is scheduled from `first` to `last`, both included: a
// chain fused across it could read a value before or after the update wrongly.
inline bool effect_between(const Graph& g, const Node* first, const Node* last) {
  for (size_t i = g.index_of(first), e = g.index_of(last); i <= e; ++i)
    if (g.nodes[i]->is_effect()) return true;
  return false;
}

// ---- passes a backend contributes ---------------------------------------------------------------
using PassFn = size_t (*)(Graph&);
struct BackendPass {
  DeviceType device;  // runs only on graphs with a node on this device, and rewrites only the
                      // nodes on it (a graph may mix devices: host scalars beside GPU work)
  const char* name;   // its IR dump's stage name
  int order;          // its place among the fusion stage's passes (kOrder* below)
  PassFn fn;
};
// The fusion stage's generic passes, in order; a backend pass takes a number between them.
inline constexpr int kOrderFoldBatchnormIntoWeights = 100;  // fold_batchnorm_into_weights
inline constexpr int kOrderMatmulEpilogue = 200;  // fuse_matmul_epilogue (the accelerators')
inline constexpr int kOrderSoftmaxCrossEntropy = 300;
inline constexpr int kOrderElementwise = 400;
inline constexpr int kOrderOptimizer = 700;
bool register_backend_pass(const BackendPass& p);
const std::vector<BackendPass>& backend_passes();  // sorted by order
// SPORE_REGISTER_PASS(CPU, "fuse_conv_matmul", 200, fuse_conv_matmul); in the backend's folder.
#define SPORE_REGISTER_PASS(Dev, name, order, fn)      \
  [[maybe_unused]] static const bool spore_pass_##fn = \
      ::spore::graph::register_backend_pass({::spore::DeviceType::Dev, name, order, fn})

// The per-channel scale = gamma / sqrt(var + eps) and shift = beta + (b - mean) * scale that fold
// `bn` (a batch_norm_inference) into the conv2d before it (`conv_bias`: its bias, or null), as
// nodes inserted at `pos` (advanced past them) under `amp`, in the statistics' dtype. Both
// BatchNorm foldings use it (this generic one and the CPU's oneDNN post-op one).
std::pair<Value*, Value*> batchnorm_scale_shift(Graph& g, size_t& pos, const Node& bn,
                                                Value* conv_bias, const ops::PrecisionPolicy* amp);
// conv2d -> batch_norm_inference with constant weights and statistics, on `device`, -> one conv2d
// with the folded weight and bias (passes/bn_weight_folding.cpp). A backend without its own
// BatchNorm folding registers it for its device; returns the batch norms folded.
size_t fold_batchnorm_into_weights(Graph& g, DeviceType device);

// 0-d host constants read by nodes on another device -> constants on that device (uploaded once at
// compile time, not copied in at every call); returns the inputs replaced.
size_t place_scalar_constants(Graph& g);

// Throws an internal error unless every node's inputs are defined before it and its outputs'
// shapes and dtypes are what the op's inference gives for its inputs, on one device.
void verify(const Graph& g);
// Removes nodes whose outputs nobody uses; effects (in-place updates) are always kept.
size_t dead_code_elimination(Graph& g);
// Merges nodes with the same op, attributes and inputs, and constants with the same bytes.
size_t common_subexpression_elimination(Graph& g);
// Runs nodes whose inputs are all constants once, at compile time.
size_t constant_folding(Graph& g);
// x*1, 1*x, x/1, x+0, 0+x, x-0 -> x; cast to the same dtype; reshape chains; double permutes;
// neg(neg(x)).
size_t algebraic_simplification(Graph& g);
// Per-parameter ApplyMomentum / ApplyAdam effects with equal attributes and dtype -> one
// FusedApplyMomentum / FusedApplyAdam node, where effect order allows; returns updates fused.
size_t fuse_optimizer(Graph& g);
// Mixed precision (passes/amp_casts.cpp): casts every node's inputs as amp::decide says for the
// policy it was traced under (Node::amp), re-infers its outputs, casts O1 outputs back to
// float32, and gives policy-less nodes, effects and the graph outputs their traced dtypes. Run
// once, first. Returns the casts inserted.
size_t insert_amp_casts(Graph& g);
// cast(cast(x: A -> B) -> A) -> x and cast chains -> one cast when A -> B is exact (f16/bf16 ->
// f32); casts to the same dtype removed; cast(add/sub/mul(cast(a), cast(b)) -> L) with a, b in L
// -> the op in L (bit-identical: L kernels compute in float and round once).
size_t remove_cast_pairs(Graph& g);

// Softmax + cross-entropy (passes/softmax_ce_fusion.cpp): log_softmax -> gather (-> reshape ->
// neg) and its backward (scatter_add -> sum -> exp * sum -> sub) -> one
// softmax_cross_entropy_fused node plus dlogits * -dL/dgather; returns losses fused.
size_t fuse_softmax_cross_entropy(Graph& g);
// Elementwise fusion (passes/elementwise_fusion.cpp): connected pointwise nodes of one output
// shape whose intermediates have no outside reader -> one fused_elementwise node running a small
// program (ops/fused_program.h); run after the backends' conv/matmul post-op fusions. Returns
// nodes made.
size_t fuse_elementwise(Graph& g);
// relu_grad(dy, x) where y = relu(x) runs before it -> relu_grad(dy, y) (y > 0 exactly where
// x > 0, NaN and -0 included): x then has no reader besides the relu, so the fusion passes can
// fold it into its producer. Returns how many were rewritten.
size_t point_relu_grads_at_outputs(Graph& g);
// Matmul epilogue fusion for an accelerator (passes/matmul_epilogue.cpp): matmul(a, b (K, N)) +
// bias (N) [-> relu | gelu(approximate)] on `device` -> one matmul_epilogue node (cuBLASLt's bias
// / activation epilogues); returns chains fused.
size_t fuse_matmul_epilogue(Graph& g, DeviceType device);

// Recompute (passes/recompute.cpp): backward reads of activations made by the forward nodes of a
// recompute cell (Node::recompute_scope) go to copies of those nodes inserted before their first
// backward reader, so the originals die in the forward pass. Run after CSE (which would merge the
// copies back). Returns nodes copied.
size_t recompute(Graph& g);

// verify, then the passes in order until nothing changes (at most a few rounds), verify again;
// each stage is dumped when SPORE_DUMP_IR is set.
void run_pipeline(Graph& g);

}  // namespace spore::graph
