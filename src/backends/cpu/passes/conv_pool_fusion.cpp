// Conv + max-pool fusion for a network's first convolution (LeNet-5's conv1: 1 -> 6 channels,
// then relu and a 2x2 max pool), in both directions of the training step:
//
//   forward:  conv2d / conv2d_fused (bias, relu) -> max_pool2d            -> conv2d_pool_fused
//   backward: max_pool2d_backward -> conv2d_backward_weight              ->
//   conv2d_backward_weight_pooled
//
// The forward computes the conv rows a pool window needs and pools them at once, so the conv
// output (4x the pool's) is never written or read back; the backward visits only the pool's
// argmax positions (one per pooled element: a quarter of a 2x2 pool's input), so the dense
// gradient of the conv output, three quarters zeros, is never built. PyNative runs the ops one
// by one and cannot do either.
//
// Only where the intermediate has no other reader (after point_relu_grads_at_outputs and the
// relu_grad-before-pool rewrite of algebraic_simplification, the conv output's one reader is the
// pool), for plain float32 NCHW, groups 1, and at most 4 input channels: the geometries the
// direct conv kernels take (backends/cpu/kernels/conv_direct.h), where oneDNN's blocked kernels
// have nothing to offer. Run after blocked_layout (which leaves such convs plain).
// SPORE_GRAPH_DISABLE=conv_pool_fusion skips it (the pipeline reads it).
#include <string>
#include <unordered_map>

#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

constexpr int64_t kMaxInputChannels = 4;

bool plain_f32(const Node& n) {
  return n.device.type == DeviceType::CPU && n.inputs[0]->dtype == kFloat32 &&
         n.inputs[0]->shape.size() == 4 && !n.attrs.get_bool("blocked_x", false) &&
         !n.attrs.get_bool("blocked_y", false) && !n.attrs.get_bool("blocked", false) &&
         n.attrs.get_int("groups", 1) == 1;
}

// A conv the fused forward kernel takes: bias and / or relu only.
bool fusable_conv(const Node& n) {
  if (n.op != OpId::Conv2d && n.op != op::Conv2dFused()) return false;
  if (!plain_f32(n) || n.inputs[1]->shape[1] > kMaxInputChannels) return false;
  if (n.op == OpId::Conv2d) return true;
  const std::string act = n.attrs.has("act") ? n.attrs.get_string("act") : std::string();
  return !n.attrs.get_bool("has_scale", false) && !n.attrs.get_bool("has_residual", false) &&
         (act.empty() || act == "relu");
}

Node* insert_like(Graph& g, const Node* at, OpId op, std::vector<Value*> ins, ops::Attrs attrs,
                  const ops::PrecisionPolicy* policy) {
  return g.insert_inferred(g.index_of(at), op, std::move(ins), std::move(attrs), policy);
}

}  // namespace

size_t fuse_conv_pool(Graph& g) {
  size_t fused = 0;
  auto reads = count_reads(g);
  std::vector<Node*> pools, weight_grads;
  for (const auto& n : g.nodes) {
    if (n->op == OpId::MaxPool2d) pools.push_back(n.get());
    if (n->op == OpId::Conv2dBackwardWeight) weight_grads.push_back(n.get());
  }
  // Forward: conv -> max_pool2d. The fused node takes the pool's place (every input is defined
  // by the conv's).
  for (Node* p : pools) {
    Node* c = p->inputs[0]->producer;
    if (!c || !fusable_conv(*c) || reads[p->inputs[0]] != 1 || !plain_f32(*p)) continue;
    ops::Attrs a;
    for (const char* k : {"stride", "padding", "dilation"}) a.set(k, c->attrs.get_ints(k));
    a.set("groups", int64_t(1)).set("has_bias", c->inputs.size() == 3);
    if (c->attrs.has("act")) a.set("act", c->attrs.get_string("act"));
    a.set("pool_kernel_size", p->attrs.get_ints("kernel_size"))
        .set("pool_stride", p->attrs.get_ints("stride"))
        .set("pool_padding", p->attrs.get_ints("padding"))
        .set("pool_ceil_mode", p->attrs.get_bool("ceil_mode", false));
    Node* f = insert_like(g, p, op::Conv2dPoolFused(), c->inputs, std::move(a), c->precision);
    g.replace_all_uses(p->outputs[0], f->outputs[0]);
    g.replace_all_uses(p->outputs[1], f->outputs[1]);
    ++fused;  // c and p are dead: dead_code_elimination removes them
  }
  // Backward: max_pool2d_backward -> conv2d_backward_weight (dy, x).
  for (Node* w : weight_grads) {
    Node* b = w->inputs[0]->producer;
    if (!b || b->op != OpId::MaxPool2dBackward || reads[w->inputs[0]] != 1 || !plain_f32(*w) ||
        !plain_f32(*b) || w->attrs.get_ints("weight_shape")[1] > kMaxInputChannels)
      continue;
    ops::Attrs a;
    for (const char* k : {"stride", "padding", "dilation"}) a.set(k, w->attrs.get_ints(k));
    a.set("groups", int64_t(1))
        .set("weight_shape", w->attrs.get_ints("weight_shape"))
        .set("conv_output_shape", b->attrs.get_ints("input_shape"));
    Node* f = insert_like(g, w, op::Conv2dBackwardWeightPooled(),
                          {b->inputs[0], b->inputs[1], w->inputs[1]}, std::move(a), w->precision);
    g.replace_all_uses(w->outputs[0], f->outputs[0]);
    ++fused;
  }
  if (fused > 0) dead_code_elimination(g);
  return fused;
}

SPORE_REGISTER_PASS(CPU, "conv_pool_fusion", kOrderConvPoolFusion, fuse_conv_pool);

}  // namespace spore::cpu
