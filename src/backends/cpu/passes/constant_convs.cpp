// Convolutions on constant weights (an imported or frozen model), prepared once, here:
//
//   conv2d[_fused](x_b, w[, bias][, scale, shift][, residual_b]) {act "" / relu / silu}
//     ->  conv2d_winograd(x_b, u, beta[, residual_b])    3x3, stride 1, enough output tiles
//     ->  conv2d_packed(x_b, wp, beta[, residual_b])     any other kernel size and stride
//
// where (u, beta) = winograd_weights(w, bias, scale, shift) or (wp, beta) = pack_conv_weights(...)
// run now and are captured as constants (the original weight is dropped from the graph). Only
// where every weight-side input is a constant: in a training graph the weights are parameters and
// the conv keeps oneDNN. Both kernels fold the BatchNorm scale into the weights and take the
// shift, the residual and the activation (relu; silu, YOLOv5's) in their epilogue.
//
// Winograd does 2.25x fewer multiplies, but its transformed weights are 16/9 the size and are
// streamed once per block of tiles; with few tiles per thread (a 4x4 map at batch 1) reading them
// costs more than the multiplies saved, and the direct kernel is faster
// (bench/micro/constant_conv.cpp measures all three ways).
// SPORE_NO_CONSTANT_CONVS=1 turns the pass off (for A/B measurements).
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "core/parallel.h"
#include "spore/grad_mode.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

constexpr int64_t kMinTilesPerThread = 8;

bool disabled() {
  const char* e = std::getenv("SPORE_NO_CONSTANT_CONVS");
  return e && *e && std::string(e) != "0";
}

bool all_ones(const Shape& s) {
  for (int64_t v : s)
    if (v != 1) return false;
  return true;
}

enum class Way { kOneDnn, kWinograd, kPacked };

// How conv node n runs: kOneDnn (left alone) unless its weights are constants and the kernels
// here take its geometry.
Way way_of(const Node& n) {
  const ops::Attrs& a = n.attrs;
  if (!a.get_bool("blocked_x", false) || !a.get_bool("blocked_y", false)) return Way::kOneDnn;
  const Value* w = n.inputs[1];
  const Value* y = n.outputs[0];
  if (y->dtype != kFloat32 || w->dtype != kFloat32 || w->kind != ValueKind::kConstant) return Way::kOneDnn;
  if (w->shape.size() != 4 || w->shape[0] % 16 != 0 || w->shape[1] % 16 != 0 || w->shape[2] * w->shape[3] > 64)
    return Way::kOneDnn;
  if (!all_ones(a.get_ints("dilation")) || a.get_int("groups", 1) != 1) return Way::kOneDnn;
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  if (!act.empty() && act != "relu" && act != "silu") return Way::kOneDnn;
  // Per-channel inputs (bias, scale, shift) sit between the weight and the residual.
  const size_t per_channel = n.inputs.size() - 2 - size_t(a.get_bool("has_residual", false));
  for (size_t i = 2; i < 2 + per_channel; ++i)
    if (n.inputs[i]->kind != ValueKind::kConstant || n.inputs[i]->dtype != kFloat32) return Way::kOneDnn;
  const int64_t tiles = y->shape[0] * ((y->shape[2] + 1) / 2) * ((y->shape[3] + 1) / 2);
  const bool winograd = w->shape[2] == 3 && w->shape[3] == 3 && all_ones(a.get_ints("stride")) &&
                        tiles >= kMinTilesPerThread * get_num_threads();
  return winograd ? Way::kWinograd : Way::kPacked;
}

}  // namespace

size_t constant_convs(Graph& g) {
  if (disabled()) return 0;
  NoGradGuard no_grad;
  size_t rewritten = 0;
  std::unordered_set<const Node*> dead;
  for (size_t pos = 0; pos < g.nodes.size(); ++pos) {
    Node* n = g.nodes[pos].get();
    if (n->op != OpId::Conv2d && n->op != op::Conv2dFused()) continue;
    const Way way = way_of(*n);
    if (way == Way::kOneDnn) continue;
    const bool fused = n->op == op::Conv2dFused();
    const bool has_bias = fused ? n->attrs.get_bool("has_bias", false) : n->inputs.size() == 3;
    const bool has_scale = fused && n->attrs.get_bool("has_scale", false);
    const bool has_res = fused && n->attrs.get_bool("has_residual", false);
    // The weight preparation runs now, through the dispatcher, as constant folding would.
    ops::Tensors wins;
    const size_t per_channel = size_t(has_bias) + 2 * size_t(has_scale);
    for (size_t i = 1; i < 2 + per_channel; ++i) wins.push_back(n->inputs[i]->tensor);
    const ops::Tensors prepared =
        ops::call(way == Way::kWinograd ? op::WinogradWeights() : op::PackConvWeights(), wins,
                  ops::Attrs().set("has_bias", has_bias).set("has_scale", has_scale));
    std::vector<Value*> ins{n->inputs[0], g.add_capture(prepared[0].detach(), ValueKind::kConstant),
                            g.add_capture(prepared[1].detach(), ValueKind::kConstant)};
    if (has_res) ins.push_back(n->inputs.back());
    ops::Attrs a;
    a.set("padding", n->attrs.get_ints("padding")).set("has_residual", has_res);
    a.set("act", fused && n->attrs.has("act") ? n->attrs.get_string("act") : std::string());
    if (way == Way::kPacked) a.set("stride", n->attrs.get_ints("stride"));
    const OpId op = way == Way::kWinograd ? op::Conv2dWinograd() : op::Conv2dPacked();
    ops::Metas in_metas;
    for (const Value* v : ins) in_metas.push_back({v->shape, v->dtype});
    const ops::Metas out = ops::op_def(op).rules.infer(in_metas, a);
    Node* c = g.insert_node(pos + 1, op, std::move(ins), std::move(a), out);
    c->precision = n->precision;
    g.replace_all_uses(n->outputs[0], c->outputs[0]);
    dead.insert(n);
    ++rewritten;
  }
  std::erase_if(g.nodes, [&](const auto& up) { return dead.count(up.get()) > 0; });
  g.remove_unused_inputs();
  return rewritten;
}

SPORE_REGISTER_PASS(CPU, "constant_convs", kOrderConstantConvs, constant_convs);

}  // namespace spore::cpu
