// Winograd convolution for constant weights (backends/cpu/kernels/conv_winograd.h):
//
//   conv2d[_fused](x_b, w[, bias][, scale, shift][, residual_b]) {3x3, stride 1, act "" / relu}
//     ->  conv2d_winograd(x_b, u, beta[, residual_b])
//
// where (u, beta) = winograd_weights(w, bias, scale, shift) is computed here, once, and captured as
// constants (the original weight is dropped from the graph). Only where every weight-side input is
// a constant: in a training graph the weights are parameters and the conv keeps oneDNN.
//
// Where it pays: Winograd does 2.25x fewer multiplies, but its transformed weights are 16/9 the
// size and are streamed once per block of tiles. With few tiles (a 4x4 or 8x8 map at batch 1) the
// conv is bound by reading weights and oneDNN's direct kernel is faster, so the pass wants at least
// kMinTilesPerThread tiles for each thread (bench/micro/winograd.cpp measures both sides).
// SPORE_NO_WINOGRAD=1 turns the pass off (for A/B measurements).
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "backends/cpu/passes/passes.h"
#include "core/parallel.h"
#include "spore/grad_mode.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

constexpr int64_t kMinTilesPerThread = 32;

bool disabled() {
  const char* e = std::getenv("SPORE_NO_WINOGRAD");
  return e && *e && std::string(e) != "0";
}

bool all_ones(const Shape& s) {
  for (int64_t v : s)
    if (v != 1) return false;
  return true;
}

// Whether conv node n can and should run as Winograd.
bool wanted(const Node& n) {
  const ops::Attrs& a = n.attrs;
  if (!a.get_bool("blocked_x", false) || !a.get_bool("blocked_y", false)) return false;
  const Value* w = n.inputs[1];
  const Value* y = n.outputs[0];
  if (y->dtype != kFloat32 || w->dtype != kFloat32 || w->kind != ValueKind::kConstant) return false;
  if (w->shape.size() != 4 || w->shape[2] != 3 || w->shape[3] != 3 || w->shape[0] % 16 != 0 ||
      w->shape[1] % 16 != 0)
    return false;
  if (!all_ones(a.get_ints("stride")) || !all_ones(a.get_ints("dilation")) || a.get_int("groups", 1) != 1)
    return false;
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  if (!act.empty() && act != "relu") return false;
  // Per-channel inputs (bias, scale, shift) sit between the weight and the residual.
  const size_t per_channel = n.inputs.size() - 2 - size_t(a.get_bool("has_residual", false));
  for (size_t i = 2; i < 2 + per_channel; ++i)
    if (n.inputs[i]->kind != ValueKind::kConstant || n.inputs[i]->dtype != kFloat32) return false;
  const int64_t tiles = y->shape[0] * ((y->shape[2] + 1) / 2) * ((y->shape[3] + 1) / 2);
  return tiles >= kMinTilesPerThread * get_num_threads();
}

}  // namespace

size_t winograd_convs(Graph& g) {
  if (disabled()) return 0;
  NoGradGuard no_grad;
  size_t rewritten = 0;
  std::unordered_set<const Node*> dead;
  for (size_t pos = 0; pos < g.nodes.size(); ++pos) {
    Node* n = g.nodes[pos].get();
    if ((n->op != OpId::Conv2d && n->op != OpId::Conv2dFused) || !wanted(*n)) continue;
    const bool fused = n->op == OpId::Conv2dFused;
    const bool has_bias = fused ? n->attrs.get_bool("has_bias", false) : n->inputs.size() == 3;
    const bool has_scale = fused && n->attrs.get_bool("has_scale", false);
    const bool has_res = fused && n->attrs.get_bool("has_residual", false);
    // The weight transform runs now, through the dispatcher, as constant folding would.
    ops::Tensors wins;
    const size_t per_channel = size_t(has_bias) + 2 * size_t(has_scale);
    for (size_t i = 1; i < 2 + per_channel; ++i) wins.push_back(n->inputs[i]->tensor);
    const ops::Tensors ub = ops::call(OpId::WinogradWeights, wins,
                                      ops::Attrs().set("has_bias", has_bias).set("has_scale", has_scale));
    std::vector<Value*> ins{n->inputs[0], g.add_capture(ub[0].detach(), ValueKind::kConstant),
                            g.add_capture(ub[1].detach(), ValueKind::kConstant)};
    if (has_res) ins.push_back(n->inputs.back());
    ops::Attrs a;
    a.set("padding", n->attrs.get_ints("padding")).set("has_residual", has_res);
    a.set("act", fused && n->attrs.has("act") ? n->attrs.get_string("act") : std::string());
    ops::Metas in_metas;
    for (const Value* v : ins) in_metas.push_back({v->shape, v->dtype});
    const ops::Metas out = ops::op_def(OpId::Conv2dWinograd).rules.infer(in_metas, a);
    Node* w = g.insert_node(pos + 1, OpId::Conv2dWinograd, std::move(ins), std::move(a), out);
    w->precision = n->precision;
    g.replace_all_uses(n->outputs[0], w->outputs[0]);
    dead.insert(n);
    ++rewritten;
  }
  std::erase_if(g.nodes, [&](const auto& up) { return dead.count(up.get()) > 0; });
  g.remove_unused_inputs();
  return rewritten;
}

SPORE_REGISTER_PASS(CPU, "winograd", kOrderWinograd, winograd_convs);

}  // namespace spore::cpu
