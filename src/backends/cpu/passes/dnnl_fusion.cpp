// Conv / matmul epilogue fusion through oneDNN post-ops:
//
//   conv2d(x, w[, b]) [+ bias (C,1,1)] [+ residual] [-> activation]  ->  conv2d_fused
//   matmul(a, b)      [+ bias (N)]     [+ residual] [-> activation]  ->  matmul_fused
//
// and a conv2d_fused with a folded BatchNorm (fold_batchnorm) takes its residual and activation.
// (the bias add is how nn::Dense adds its bias; nn::Conv2d passes it to conv2d itself). Every
// intermediate must have exactly one reader, the next op of the chain, so nothing the backward
// reads disappears. One exception is made legal first: relu_grad(dy, x) with x = relu's input
// is rewritten to relu_grad(dy, relu(x)) (relu(x) > 0 exactly where x > 0), so a training graph's
// conv + relu fuses and the backward reads the fused output. Activations whose gradient reads
// their input (gelu, silu, leaky_relu) fuse only where nothing else reads it (inference).
//
// The fused node takes the place of the chain's last node, so its inputs (the residual is often
// computed after the conv) are all defined; chains that straddle an effect are left alone.
// SPORE_NO_DNNL_FUSION=1 turns the pass off (for A/B measurements).
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_set>

#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

bool disabled() {
  const char* e = std::getenv("SPORE_NO_DNNL_FUSION");
  return e && *e && std::string(e) != "0";
}

// The activation's post-op attributes, or false when op is none oneDNN can fuse.
bool activation_attrs(const Node& n, ops::Attrs& a) {
  switch (n.op) {
    case OpId::Relu:
      a.set("act", "relu");
      return true;
    case OpId::LeakyRelu:
      a.set("act", "leaky_relu").set("alpha", n.attrs.get_float("alpha", 0.01));
      return true;
    case OpId::Sigmoid:
      a.set("act", "sigmoid");
      return true;
    case OpId::Tanh:
      a.set("act", "tanh");
      return true;
    case OpId::Gelu:
      a.set("act", n.attrs.get_bool("approximate", false) ? "gelu_tanh" : "gelu");
      return true;
    case OpId::Silu:
      a.set("act", "silu");
      return true;
    case OpId::Clamp: {
      const double inf = std::numeric_limits<double>::infinity();
      a.set("act", "clamp")
          .set("alpha", n.attrs.get_float("min", -inf))
          .set("beta", n.attrs.get_float("max", inf));
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

size_t fuse_conv_matmul(Graph& g) {
  if (disabled()) return 0;
  point_relu_grads_at_outputs(g);  // frees relu's input for fusion

  size_t fused = 0;
  std::unordered_set<const Node*> dead;
  std::vector<Node*> anchors;  // every conv2d / matmul (and folded conv), in schedule order
  for (const auto& n : g.nodes)
    if (n->device.type != DeviceType::CPU) {
      continue;  // another backend's node (a mixed graph)
    } else if (n->op == OpId::Conv2d || n->op == OpId::Matmul ||
               (n->op == op::Conv2dFused() && !n->attrs.get_bool("has_residual", false) &&
                (!n->attrs.has("act") || n->attrs.get_string("act").empty())))
      anchors.push_back(n.get());
  for (Node* n : anchors) {
    Uses uses(g);  // rebuilt per chain: earlier fusions changed the readers
    const bool prefused = n->op == op::Conv2dFused();  // a folded BatchNorm: scale and shift
    const bool conv = n->op == OpId::Conv2d || prefused;
    Value* cur = n->outputs[0];
    if (cur->dtype != kFloat32 && cur->dtype != kBFloat16 && cur->dtype != kFloat16)
      continue;  // oneDNN's
    if (!conv &&
        (n->inputs[0]->shape.size() < 2 || n->inputs[1]->shape.size() < 2 || cur->shape.size() > 3))
      continue;
    Value* bias = n->op == OpId::Conv2d && n->inputs.size() == 3 ? n->inputs[2] : nullptr;
    Value *residual = nullptr, *bias_to_reshape = nullptr;
    std::vector<Node*> chain{n};
    ops::Attrs post = conv ? n->attrs : ops::Attrs();
    const int64_t channels = conv ? cur->shape[1] : cur->shape.back();
    // + bias
    if (Node* u = uses.single(cur);
        !bias && !prefused && u && u->op == OpId::Add && same_meta(u->outputs[0], cur)) {
      Value* other = u->inputs[0] == cur ? u->inputs[1] : u->inputs[0];
      const Shape& s = other->shape;
      const bool is_bias =
          other != cur && other->dtype == cur->dtype && other->is_contiguous() &&
          (conv ? (s == Shape{channels, 1, 1} || s == Shape{1, channels, 1, 1})
                : (s == Shape{channels} || (s == Shape{1, channels} && cur->shape.size() == 2)));
      if (is_bias) {
        bias = other;
        if (s.size() != 1) bias_to_reshape = other;
        cur = u->outputs[0];
        chain.push_back(u);
      }
    }
    // + residual (same shape)
    if (Node* u = uses.single(cur);
        u && u->op == OpId::Add && same_meta(u->outputs[0], cur) && u->inputs[0] != u->inputs[1]) {
      Value* other = u->inputs[0] == cur ? u->inputs[1] : u->inputs[0];
      if (same_meta(other, cur)) {
        residual = other;
        cur = u->outputs[0];
        chain.push_back(u);
      }
    }
    // -> activation
    if (Node* u = uses.single(cur);
        u && u->outputs.size() == 1 && same_meta(u->outputs[0], cur) &&
        activation_attrs(*u, post)) {  // (an effect reader has no outputs)
      cur = u->outputs[0];
      chain.push_back(u);
    }
    if (chain.size() == 1) continue;                   // nothing to take
    if (effect_between(g, n, chain.back())) continue;  // it may mutate what the chain reads

    size_t pos = g.index_of(chain.back());
    if (bias_to_reshape) {
      Node* r = g.insert_node(pos++, OpId::Reshape, {bias_to_reshape},
                              ops::Attrs().set("shape", Shape{channels}),
                              {{Shape{channels}, bias->dtype}});
      r->precision = n->precision;
      bias = r->outputs[0];
    }
    std::vector<Value*> ins =
        prefused ? n->inputs : std::vector<Value*>{n->inputs[0], n->inputs[1]};
    if (bias) ins.push_back(bias);
    if (residual) ins.push_back(residual);
    if (!prefused) post.set("has_bias", bias != nullptr);
    post.set("has_residual", residual != nullptr);
    const OpId op = conv ? op::Conv2dFused() : op::MatmulFused();
    ops::Metas in_metas;
    for (const Value* v : ins) in_metas.push_back({v->shape, v->dtype});
    const ops::Metas out = ops::op_def(op).rules.infer(in_metas, post);
    Node* f = g.insert_node(pos, op, std::move(ins), std::move(post), out);
    f->precision = n->precision;
    g.replace_all_uses(cur, f->outputs[0]);
    for (Node* c : chain) dead.insert(c);
    std::erase_if(g.nodes, [&](const auto& up) { return dead.count(up.get()) > 0; });
    dead.clear();  // freed: their addresses may come back
    ++fused;
  }
  g.remove_unused_inputs();
  return fused;
}

SPORE_REGISTER_PASS(CPU, "fuse_conv_matmul", kOrderConvMatmulFusion, fuse_conv_matmul);

}  // namespace spore::cpu
