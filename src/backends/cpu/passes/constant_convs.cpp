// Convolutions on constant weights (an imported or frozen model), prepared once, here:
//
//   conv2d[_fused](x_b, w[, bias][, scale, shift][, residual_b]) {act "" / relu / silu}
//     ->  conv2d_winograd(x_b, u, beta[, residual_b])    3x3, stride 1, enough output tiles
//     ->  conv2d_packed(x_b, wp, beta[, residual_b])     any other kernel size and stride, and a
//                                                         plain x of < 16 channels (the stem)
//   conv2d[_fused](x_b, w, ...) -> y plain (its readers are plain ops; no residual)
//     ->  from_blocked(conv2d_packed / _winograd(x_b, ...) in channels padded to 16, channels=O)
//
// where (u, beta) = winograd_weights(w, bias, scale, shift) {tile 2 or 4: F(2x2, 3x3) or F(4x4,
// 3x3), winograd_tile's choice for the geometry} or (wp, beta) = pack_conv_weights(...) run now and
// are captured as constants (the original weight is dropped from the graph). Only where every
// weight-side input is a constant: in a training graph the weights are parameters and the conv
// keeps oneDNN. Both kernels fold the BatchNorm scale into the weights and take the shift, the
// residual and the activation (relu; silu and sigmoid, YOLOv5's) in their epilogue.
//
// Which of the two (or neither) is the forward convolution list's answer (backends/cpu/kernels/
// conv_list.h: winograd and packed take only convolutions whose weights are graph constants, and
// say why not); this pass asks the list for every conv with constant weights and logs the choice
// at debug level. SPORE_CONV_IMPL=-winograd,-packed turns the rewrite off (for A/B measurements).
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "core/log.h"
#include "spore/grad_mode.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

enum class Way { kOneDnn, kWinograd, kPacked };

// How conv node n runs: kOneDnn (left to the kernels' list) unless its weights are constants and
// the forward list chooses winograd or packed for it; *tile: Winograd's output tile (2 or 4).
// A blocked input into a plain output (one that plain ops read, as YOLOv5's detect convs' 255
// channels are) is asked as a conv into blocked channels padded to 16; *padded_o: that count
// when the answer is winograd or packed (0 otherwise).
Way way_of(const Node& n, bool fused, int64_t* tile, int64_t* padded_o) {
  const Value* y = n.outputs[0];
  const Value* w = n.inputs[1];
  if (w->shape.size() != 4) return Way::kOneDnn;
  ConvDesc d = ConvDesc::of(ConvProp::kForward, n.inputs[0]->shape, w->shape, y->shape, y->dtype,
                            n.attrs, fused, n.inputs.size());
  // The weight and the per-channel inputs (bias, scale, shift: between it and the residual).
  const size_t per_channel = n.inputs.size() - 2 - size_t(d.residual);
  d.constant_weights = w->kind == ValueKind::kConstant && w->dtype == kFloat32;
  for (size_t i = 2; i < 2 + per_channel; ++i)
    d.constant_weights = d.constant_weights && n.inputs[i]->kind == ValueKind::kConstant &&
                         n.inputs[i]->dtype == kFloat32;
  if (!d.constant_weights) return Way::kOneDnn;  // the kernel's list decides when it runs
  const bool pad = d.blocked_x && !d.blocked_y && !d.residual;
  if (pad) d.blocked_y = true, d.O = (d.O + 15) / 16 * 16;
  const ConvChoice c = choose_conv(d);
  const std::string name = c.name();
  *tile = winograd_tile(d.N, d.OH, d.OW, d.C, d.O);
  if (log::enabled(log::Level::Debug))
    log::debug("conv {}: {}{}", d.str(), c.str(),
               name == "winograd"
                   ? " F(" + std::to_string(*tile) + "x" + std::to_string(*tile) + ", 3x3)"
                   : "");
  const Way way = name == "winograd" ? Way::kWinograd
                  : name == "packed" ? Way::kPacked
                                     : Way::kOneDnn;
  *padded_o = pad && way != Way::kOneDnn ? d.O : 0;
  return way;
}

// The prepared ops' inputs (w[, bias][, scale, shift]) for O padded to `to` output channels:
// zero weights, bias and shift, unit scale (the extra channels compute zeros, dropped after).
ops::Tensors padded(ops::Tensors t, int64_t to, bool has_bias, bool has_scale) {
  const int64_t extra = to - t[0].size(0);
  const auto append = [](const Tensor& a, const Tensor& b) {
    return ops::call1(OpId::Concat, {a, b}, ops::Attrs().set("axis", int64_t(0)));
  };
  Shape ws = t[0].shape();
  ws[0] = extra;
  t[0] = append(t[0], zeros(ws, kFloat32, Device{}));
  size_t i = 1;
  if (has_bias) t[i] = append(t[i], zeros({extra}, kFloat32, Device{})), ++i;
  if (has_scale) {
    t[i] = append(t[i], ones({extra}, kFloat32, Device{}));
    t[i + 1] = append(t[i + 1], zeros({extra}, kFloat32, Device{}));
  }
  return t;
}

}  // namespace

size_t constant_convs(Graph& g) {
  NoGradGuard no_grad;
  size_t rewritten = 0;
  std::unordered_set<const Node*> dead;
  for (size_t pos = 0; pos < g.nodes.size(); ++pos) {
    Node* n = g.nodes[pos].get();
    if ((n->op != OpId::Conv2d && n->op != op::Conv2dFused()) || n->device.type != DeviceType::CPU)
      continue;
    const bool fused = n->op == op::Conv2dFused();
    int64_t tile = 2, padded_o = 0;
    const Way way = way_of(*n, fused, &tile, &padded_o);
    if (way == Way::kOneDnn) continue;
    const bool has_bias = fused ? n->attrs.get_bool("has_bias", false) : n->inputs.size() == 3;
    const bool has_scale = fused && n->attrs.get_bool("has_scale", false);
    const bool has_res = fused && n->attrs.get_bool("has_residual", false);
    // The weight preparation runs now, through the dispatcher, as constant folding would.
    ops::Tensors wins;
    const size_t per_channel = size_t(has_bias) + 2 * size_t(has_scale);
    for (size_t i = 1; i < 2 + per_channel; ++i) wins.push_back(n->inputs[i]->tensor);
    if (padded_o) wins = padded(std::move(wins), padded_o, has_bias, has_scale);
    const ops::Tensors prepared = ops::call(
        way == Way::kWinograd ? op::WinogradWeights() : op::PackConvWeights(), wins,
        ops::Attrs().set("has_bias", has_bias).set("has_scale", has_scale).set("tile", tile));
    std::vector<Value*> ins{n->inputs[0], g.add_capture(prepared[0].detach(), ValueKind::kConstant),
                            g.add_capture(prepared[1].detach(), ValueKind::kConstant)};
    if (has_res) ins.push_back(n->inputs.back());
    ops::Attrs a;
    a.set("padding", n->attrs.get_ints("padding")).set("has_residual", has_res);
    a.set("act", fused && n->attrs.has("act") ? n->attrs.get_string("act") : std::string());
    if (way == Way::kPacked) a.set("stride", n->attrs.get_ints("stride"));
    // A plain input (the stem): y keeps the blocked output's lanes.
    if (n->inputs[0]->shape.size() == 4) a.set("lanes", n->outputs[0]->shape.at(4));
    const OpId op = way == Way::kWinograd ? op::Conv2dWinograd() : op::Conv2dPacked();
    ops::Metas in_metas;
    for (const Value* v : ins) in_metas.push_back({v->shape, v->dtype});
    const ops::Metas out = ops::op_def(op).rules.infer(in_metas, a);
    Node* c = g.insert_node(pos + 1, op, std::move(ins), std::move(a), out);
    c->precision = n->precision;
    Value* y = c->outputs[0];
    if (padded_o) {  // back to the plain output, the padding channels dropped
      const Value* old_y = n->outputs[0];
      size_t at = pos + 2;
      // In 8 lanes the padding can be whole blocks (20 channels: 4 blocks, 3 hold them): a view
      // of the blocks from_blocked reads.
      const int64_t L = y->shape[4], blocks = (old_y->shape[1] + L - 1) / L;
      if (y->shape[1] != blocks) y = channel_block_view(g, at++, y, 0, blocks, n->precision);
      y = g.insert_node(at, op::FromBlocked(), {y}, ops::Attrs().set("channels", old_y->shape[1]),
                        {{old_y->shape, old_y->dtype}})
              ->outputs[0];
    }
    g.replace_all_uses(n->outputs[0], y);
    dead.insert(n);
    ++rewritten;
  }
  std::erase_if(g.nodes, [&](const auto& up) { return dead.count(up.get()) > 0; });
  g.remove_unused_inputs();
  return rewritten;
}

SPORE_REGISTER_PASS(CPU, "constant_convs", kOrderConstantConvs, constant_convs);

}  // namespace spore::cpu
