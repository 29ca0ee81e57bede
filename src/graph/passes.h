// The graph passes: each a graph -> graph function in its own file under passes/, returning how
// many nodes it changed or removed. To add one: declare it here, write passes/<name>.cpp, add it
// to kPipeline in passes/pipeline.cpp and a test in tests/graph/passes_test.cpp.
#pragma once
#include <cstddef>

#include "graph/ir.h"

namespace spore::graph {

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
// oneDNN post-op fusion (passes/dnnl_fusion.cpp): conv2d / matmul [+ bias] [+ residual]
// [-> activation] -> one conv2d_fused / matmul_fused where the intermediates have no other reader
// (relu_grad is first pointed at relu's output); returns chains fused.
size_t fuse_conv_matmul(Graph& g);
// Inference BatchNorm folded into the preceding conv2d's weight and bias (passes/bn_folding.cpp);
// returns batch norms removed.
size_t fold_batchnorm(Graph& g);

// Softmax + cross-entropy (passes/softmax_ce_fusion.cpp): log_softmax -> gather (-> reshape ->
// neg) and its backward (scatter_add -> sum -> exp * sum -> sub) -> one
// softmax_cross_entropy_fused node plus dlogits * -dL/dgather; returns losses fused.
size_t fuse_softmax_cross_entropy(Graph& g);
// Elementwise fusion (passes/elementwise_fusion.cpp): connected pointwise nodes of one output
// shape whose intermediates have no outside reader -> one fused_elementwise node running a small
// program (ops/fused_program.h); run after the conv/matmul post-op fusion. Returns nodes made.
size_t fuse_elementwise(Graph& g);
// Blocked-layout propagation (passes/blocked_layout.cpp): float32 activations between
// convolutions, pools, batch norms and pointwise ops become oneDNN's nChw16c layout, held as
// (N, ceil(C/16), H, W, 16) tensors, with to_blocked / from_blocked at the boundaries, where the
// conv reorders saved outweigh them. Run after the fusions. Returns nodes switched to blocked.
size_t blocked_layout(Graph& g);
// Conv + max pool (passes/conv_pool_fusion.cpp), for convs with at most 4 input channels:
// conv2d[_fused] -> max_pool2d becomes conv2d_pool_fused (the conv output never stored), and
// max_pool2d_backward -> conv2d_backward_weight becomes conv2d_backward_weight_pooled (only the
// argmax positions visited). Run after blocked_layout. Returns nodes fused.
size_t fuse_conv_pool(Graph& g);

// relu_grad(dy, x) where y = relu(x) runs before it -> relu_grad(dy, y) (y > 0 exactly where
// x > 0, NaN and -0 included): x then has no reader besides the relu, so the fusion passes can
// fold it into its producer. Returns how many were rewritten.
size_t point_relu_grads_at_outputs(Graph& g);

// verify, then the passes in order until nothing changes (at most a few rounds), verify again;
// each stage is dumped when SPORE_DUMP_IR is set.
void run_pipeline(Graph& g);

}  // namespace spore::graph
