// The CPU backend's graph passes: rewrites that only pay off with oneDNN and the CPU kernels. Each
// registers itself into the Graph-mode pipeline (graph/passes.h, SPORE_REGISTER_PASS) at its
// order among the generic fusion passes, and runs on graphs with CPU nodes. This folder belongs to
// the compiler layer (it reads and rewrites graph IR); the rest of backends/cpu is the device
// layer.
#pragma once
#include <cstddef>

#include "graph/passes.h"

namespace spore::cpu {

// Pipeline order (before graph::kOrderSoftmaxCrossEntropy 300, and after kOrderElementwise 400).
inline constexpr int kOrderFoldBatchnorm = 100;
inline constexpr int kOrderConvMatmulFusion = 200;
inline constexpr int kOrderBlockedLayout = 500;
inline constexpr int kOrderConstantConvs = 550;
inline constexpr int kOrderSiblingConvs = 560;
inline constexpr int kOrderConvPoolFusion = 600;

// BatchNorm folding (bn_folding.cpp), inference: conv2d -> batch_norm_inference becomes one
// conv2d_fused(x, w, scale, shift) (the BatchNorm as oneDNN per-channel post-ops), the per-channel
// nodes constant-folded when the parameters are constants; returns batch norms removed.
size_t fold_batchnorm(graph::Graph& g);
// oneDNN post-op fusion (dnnl_fusion.cpp): conv2d / matmul [+ bias] [+ residual] [-> activation]
// -> one conv2d_fused / matmul_fused where the intermediates have no other reader (relu_grad is
// first pointed at relu's output); returns chains fused.
size_t fuse_conv_matmul(graph::Graph& g);
// Blocked-layout propagation (blocked_layout.cpp): float32 activations between convolutions,
// pools, batch norms and pointwise ops become oneDNN's nChw16c layout (nChw8c where the backend
// runs AVX2: isa.h), held as (N, ceil(C/L), H, W, L) tensors, with to_blocked / from_blocked at
// the boundaries, where the
// conv reorders saved outweigh them. Runs after the fusions. Returns nodes switched to blocked.
size_t blocked_layout(graph::Graph& g);
// Constant-weight convolutions (constant_convs.cpp): a conv2d / conv2d_fused between blocked
// activations whose weight, bias and folded BatchNorm are constants (an imported or frozen model),
// with no activation, relu, silu or sigmoid, runs on weights prepared now: Winograd
// (conv2d_winograd, F(2x2, 3x3) or F(4x4, 3x3)) for 3x3 stride-1 convs with enough output tiles,
// a direct conv on packed weights (conv2d_packed) for the rest; one into a plain output, in
// channels padded to 16 and then from_blocked. Runs after blocked_layout. Returns convs rewritten.
size_t constant_convs(graph::Graph& g);
// Sibling convolutions (sibling_convs.cpp): conv2d_packed nodes reading the same batch-1 blocked
// input with the same geometry and activation (YOLOv5's C3 cv1 / cv2) become one conv over their
// stacked weights, whose channel-block slices (views) stand for the old outputs. Runs after
// constant_convs. Returns convs removed.
size_t sibling_convs(graph::Graph& g);
// Inserts before `pos` a slice view of channel blocks [start, start + count) (dim 1) of blocked
// y, under `precision` (the node it stands for); returns the view (constant_convs and
// sibling_convs use it).
graph::Value* channel_block_view(graph::Graph& g, size_t pos, graph::Value* y, int64_t start,
                                 int64_t count, const ops::PrecisionPolicy* precision = nullptr);
// Conv + max pool (conv_pool_fusion.cpp), for convs with at most 4 input channels:
// conv2d[_fused] -> max_pool2d becomes conv2d_pool_fused (the conv output never stored), and
// max_pool2d_backward -> conv2d_backward_weight becomes conv2d_backward_weight_pooled (only the
// argmax positions visited). Runs after blocked_layout. Returns nodes fused.
size_t fuse_conv_pool(graph::Graph& g);

}  // namespace spore::cpu
