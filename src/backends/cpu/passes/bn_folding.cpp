// BatchNorm folding (inference): conv2d(x, w[, b]) -> batch_norm_inference(gamma, beta, mean, var)
// becomes one conv2d_fused(x, w, scale, shift) computing conv2d(x, w) * scale + shift with
//
//   scale = gamma / sqrt(var + eps)               (O)
//   shift = beta + (b - mean) * scale             (b = 0 without a conv bias)
//
// i.e. the classic folded conv with weight w * scale and bias shift, except that the scale is
// applied to the conv's output as a per-channel oneDNN post-op instead of to the weight: the
// parameters are captures read at run time, so a rewritten weight would cost a pass over every
// weight (read and write) per call, which at batch 1 is a quarter of ResNet-18's time. The small
// per-channel nodes are placed before the conv and run each call; constant folding removes them
// when the parameters are constants. The conv then takes a following residual add and activation
// in fuse_conv_matmul. Applies only when the conv's output has no reader but the batch norm (so
// never where a backward reads it) and no effect lies between the two.
// The scale and shift are oneDNN post-ops, so this is a CPU pass (a conv2d_fused is a CPU-private
// op); it runs first among the fusions, before fuse_conv_matmul. SPORE_NO_DNNL_FUSION=1 turns it
// off with the conv fusion.
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

Value* emit(Graph& g, size_t& pos, const ops::PrecisionPolicy* amp, OpId op,
            std::vector<Value*> ins, ops::Attrs attrs = {}) {
  return g.insert_inferred(pos++, op, std::move(ins), std::move(attrs), amp)->outputs[0];
}
}  // namespace

size_t fold_batchnorm(Graph& g) {
  const char* off = std::getenv("SPORE_NO_DNNL_FUSION");
  if (off && *off && std::string(off) != "0") return 0;
  auto reads = count_reads(g);
  size_t folded = 0;
  for (size_t bi = 0; bi < g.nodes.size(); ++bi) {
    Node* bn = g.nodes[bi].get();
    if (bn->op != OpId::BatchNormInference || bn->device.type != DeviceType::CPU) continue;
    Value* y = bn->inputs[0];
    Node* conv = y->producer;
    if (!conv || conv->op != OpId::Conv2d || reads[y] != 1 || y->shape.size() != 4) continue;
    const DType dt = y->dtype;
    bool params_ok = true;
    for (size_t i = 1; i < 5; ++i)
      params_ok = params_ok && is_floating(bn->inputs[i]->dtype) &&
                  bn->inputs[i]->shape == Shape{y->shape[1]};
    if (!params_ok) continue;
    const size_t ci = g.index_of(conv);
    bool effect = false;
    for (size_t i = ci; i < bi && !effect; ++i) effect = g.nodes[i]->is_effect();
    if (effect) continue;

    size_t pos = ci;  // new nodes go right before the conv
    const ops::PrecisionPolicy* amp = conv->precision;
    auto cast = [&](Value* v, DType to) {
      return v->dtype == to ? v : emit(g, pos, amp, OpId::Cast, {v}, ops::Attrs().set("dtype", to));
    };
    const auto [scale, shift] = graph::batchnorm_scale_shift(
        g, pos, *bn, conv->inputs.size() == 3 ? conv->inputs[2] : nullptr, amp);
    // The conv becomes conv2d_fused(x, w, scale, shift) in place (its output keeps its readers).
    conv->op = op::Conv2dFused();
    conv->attrs.set("has_bias", false)
        .set("has_scale", true)
        .set("has_residual", false)
        .set("act", "");
    conv->inputs = {conv->inputs[0], conv->inputs[1], cast(scale, dt), cast(shift, dt)};
    g.replace_all_uses(bn->outputs[0], y);
    g.nodes.erase(g.nodes.begin() + std::ptrdiff_t(pos + (bi - ci)));  // bn moved by the inserts
    bi = pos + (bi - ci) - 1;
    ++folded;
  }
  g.remove_unused_inputs();
  if (folded > 0) constant_folding(g);  // the folding nodes, when the parameters are constants
  return folded;
}

SPORE_REGISTER_PASS(CPU, "fold_batchnorm", kOrderFoldBatchnorm, fold_batchnorm);

}  // namespace spore::cpu
