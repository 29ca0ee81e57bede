// Sibling packed convolutions merged into one (horizontal fusion):
//
//   y1 = conv2d_packed(x, wp1, beta1), y2 = conv2d_packed(x, wp2, beta2)    same x, geometry, act
//     ->  y = conv2d_packed(x, [wp1; wp2], [beta1; beta2]),  y1 = y[:, :O1/L],  y2 = y[:, O1/L:]
//
// YOLOv5's C3 blocks read their input through two 1x1 convs (cv1, cv2); merged, the input is read
// once and each pass of the register tiles runs over twice the output channels (the first of the
// two convs read it from memory: 0.72 ms against the second's 0.51 at 80x80, batch 1). The outputs
// become slices (views, no copy) of the merged one's channel blocks. The kernel computes every
// output channel group on its own with the same summation order, so the merged result is the
// same bits as the two convs'. Batch 1 only: there a channel slice of a blocked (N, C/L, H, W, L)
// tensor is contiguous; at larger batches each consumer would copy it.
// SPORE_GRAPH_DISABLE=sibling_convs skips it (the pipeline reads it).
#include <map>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore::cpu {
using namespace graph;
namespace {

// Whether n is a packed conv this pass may merge: blocked x of batch 1, constant weights, no
// residual (its residual input would have to be sliced the other way).
bool mergeable(const Node& n) {
  if (n.op != op::Conv2dPacked() || n.attrs.get_bool("has_residual", false)) return false;
  const Value* x = n.inputs[0];
  return x->shape.size() == 5 && x->shape[0] == 1 && n.inputs[1]->kind == ValueKind::kConstant &&
         n.inputs[2]->kind == ValueKind::kConstant && n.outputs[0]->shape.size() == 5;
}

// What two mergeable convs must share: the input, the packed weight's (kh, kw, C, 16), padding,
// stride, activation and the output's lanes.
using Key = std::tuple<const Value*, Shape, std::vector<int64_t>, std::vector<int64_t>, std::string,
                       int64_t>;
Key key_of(const Node& n) {
  const Shape& wp = n.inputs[1]->shape;
  return {n.inputs[0],
          Shape(wp.begin() + 1, wp.end()),
          n.attrs.get_ints("padding"),
          n.attrs.get_ints("stride"),
          n.attrs.has("act") ? n.attrs.get_string("act") : std::string(),
          n.outputs[0]->shape[4]};
}

}  // namespace

size_t sibling_convs(Graph& g) {
  NoGradGuard no_grad;
  // The groups in the schedule order of their first member (not the map's, which orders by
  // pointer: the compiled graph must not depend on where the values were allocated).
  std::map<Key, size_t> index;
  std::vector<std::vector<Node*>> groups;  // schedule order within each group
  for (const auto& n : g.nodes) {
    if (!mergeable(*n)) continue;
    auto [it, fresh] = index.try_emplace(key_of(*n), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(n.get());
  }
  size_t merged = 0;
  std::unordered_set<const Node*> dead;
  for (auto& members : groups) {
    if (members.size() < 2) continue;
    std::vector<Tensor> wps, betas;
    for (const Node* m : members) {
      wps.push_back(m->inputs[1]->tensor);
      betas.push_back(m->inputs[2]->tensor);
    }
    // Before the first member: x is ready there, and every member's reader comes after it.
    Node* first = members.front();
    Node* c = g.insert_inferred(
        g.index_of(first), op::Conv2dPacked(),
        {first->inputs[0], g.add_capture(concat(wps, 0).detach(), ValueKind::kConstant),
         g.add_capture(concat(betas, 0).detach(), ValueKind::kConstant)},
        first->attrs, first->precision);
    int64_t start = 0;  // in channel blocks of c's output
    size_t pos = g.index_of(c) + 1;
    for (Node* m : members) {
      Value* old = m->outputs[0];
      const int64_t blocks = old->shape[1];
      g.replace_all_uses(old,
                         channel_block_view(g, pos++, c->outputs[0], start, blocks, m->precision));
      dead.insert(m);
      start += blocks;
    }
    merged += members.size() - 1;
  }
  std::erase_if(g.nodes, [&](const auto& up) { return dead.count(up.get()) > 0; });
  g.remove_unused_inputs();
  return merged;
}

Value* channel_block_view(Graph& g, size_t pos, Value* y, int64_t start, int64_t count,
                          const ops::PrecisionPolicy* precision) {
  Shape s = y->shape;
  s[1] = count;
  Node* v = g.insert_node(pos, ops::OpId::Slice, {y},
                          ops::Attrs()
                              .set("dim", int64_t(1))
                              .set("start", start)
                              .set("end", start + count)
                              .set("step", int64_t(1)),
                          {{s, y->dtype}});
  v->precision = precision;
  v->outputs[0]->strides = y->strides;
  v->outputs[0]->offset = y->offset + start * y->strides[1];
  return v->outputs[0];
}

SPORE_REGISTER_PASS(CPU, "sibling_convs", kOrderSiblingConvs, sibling_convs);

}  // namespace spore::cpu
