// BatchNorm folded into constant convolution weights (inference graphs: ONNX models, exported
// networks), for backends whose convolution takes a bias but no per-channel scale:
//
//   conv2d(x, w[, b]) -> batch_norm_inference(gamma, beta, mean, var)
//     = conv2d(x, w * scale, shift),  scale = gamma / sqrt(var + eps)  (per output channel)
//                                     shift = beta + (b - mean) * scale   (b = 0 without a bias)
//
// Only where w, b and the statistics are graph constants, so that constant folding computes the
// new weight and bias once, at compile time, and the run has one node where it had two. The CPU
// keeps its own pass (backends/cpu/passes/bn_folding.cpp: the scale as a oneDNN post-op, which
// also serves weights read at run time); a backend opts in with a one-line registration.
#include "graph/passes.h"

namespace spore::graph {
using ops::OpId;

std::pair<Value*, Value*> batchnorm_scale_shift(Graph& g, size_t& pos, const Node& bn,
                                                Value* conv_bias, const ops::PrecisionPolicy* amp) {
  auto op = [&](OpId id, std::vector<Value*> ins, ops::Attrs attrs = {}) {
    return g.insert_inferred(pos++, id, std::move(ins), std::move(attrs), amp)->outputs[0];
  };
  const DType pt = bn.inputs[4]->dtype;  // the statistics' (float32 under mixed precision)
  auto cast = [&](Value* v) {
    return v->dtype == pt ? v : op(OpId::Cast, {v}, ops::Attrs().set("dtype", pt));
  };
  Value* eps = g.add_capture(full({}, bn.attrs.get_float("eps"), pt), ValueKind::kConstant);
  Value* scale =
      op(OpId::Mul, {cast(bn.inputs[1]), op(OpId::Rsqrt, {op(OpId::Add, {bn.inputs[4], eps})})});
  Value* centred = conv_bias ? op(OpId::Sub, {cast(conv_bias), cast(bn.inputs[3])})
                             : op(OpId::Neg, {cast(bn.inputs[3])});
  Value* shift = op(OpId::Add, {cast(bn.inputs[2]), op(OpId::Mul, {centred, scale})});
  return {scale, shift};
}

size_t fold_batchnorm_into_weights(Graph& g, DeviceType device) {
  auto reads = count_reads(g);
  auto constant = [](const Value* v) { return v->kind == ValueKind::kConstant; };
  size_t folded = 0;
  for (size_t bi = 0; bi < g.nodes.size(); ++bi) {
    Node* bn = g.nodes[bi].get();
    if (bn->op != OpId::BatchNormInference || bn->device.type != device) continue;
    Value* y = bn->inputs[0];
    Node* conv = y->producer;
    if (!conv || conv->op != OpId::Conv2d || reads[y] != 1 || y->shape.size() != 4) continue;
    bool ok = constant(conv->inputs[1]) && is_floating(y->dtype) &&
              (conv->inputs.size() < 3 || constant(conv->inputs[2]));
    for (size_t i = 1; i < 5; ++i)
      ok = ok && constant(bn->inputs[i]) && is_floating(bn->inputs[i]->dtype) &&
           bn->inputs[i]->shape == Shape{y->shape[1]};
    if (!ok) continue;
    // The arithmetic in the statistics' dtype (float32 under mixed precision), before the conv.
    size_t pos = g.index_of(conv);
    const ops::PrecisionPolicy* amp = conv->precision;
    auto op = [&](OpId id, std::vector<Value*> ins, ops::Attrs attrs = {}) {
      return g.insert_inferred(pos++, id, std::move(ins), std::move(attrs), amp)->outputs[0];
    };
    const DType pt = bn->inputs[4]->dtype;
    auto cast = [&](Value* v, DType to) {
      return v->dtype == to ? v : op(OpId::Cast, {v}, ops::Attrs().set("dtype", to));
    };
    const auto [scale, shift] = batchnorm_scale_shift(
        g, pos, *bn, conv->inputs.size() == 3 ? conv->inputs[2] : nullptr, amp);
    Value* w = conv->inputs[1];
    const Shape per_filter{w->shape[0], 1, 1, 1};
    Value* w_scaled =
        op(OpId::Mul,
           {cast(w, pt), op(OpId::Reshape, {scale}, ops::Attrs().set("shape", per_filter))});
    // The conv takes the new weight and bias in place; its output now stands for the BN's.
    conv->inputs = {conv->inputs[0], cast(w_scaled, w->dtype), cast(shift, y->dtype)};
    g.replace_all_uses(bn->outputs[0], y);
    bi = g.index_of(bn);
    g.nodes.erase(g.nodes.begin() + std::ptrdiff_t(bi));
    --bi;
    ++folded;
  }
  if (folded > 0) {
    g.remove_unused_inputs();
    constant_folding(g);  // the new weights and biases, once
  }
  return folded;
}

}  // namespace spore::graph
