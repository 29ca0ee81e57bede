// Blocked-layout propagation: activations between convolutions stay in oneDNN's blocked layout.
//
// Every oneDNN convolution wants its activations blocked (nChw16c on AVX-512, nChw8c on AVX2: L
// channels innermost, L the ISA's vector width), so a plain NCHW graph pays a reorder in and out of
// every conv, pass and tensor: ~20% of the LeNet-5 training step, ~10% of ResNet-18's. This pass
// (the role of MindSpore's / TensorFlow's layout propagation for oneDNN) rewrites the
// differentiated graph so those tensors are produced and consumed blocked. A blocked activation of
// logical shape (N, C, H, W) is an ordinary contiguous 5-D tensor (N, ceil(C/L), H, W, L)
// (ops/blocked.h), so the planner and executor need no change; lanes past C are padding, written
// as zeros by every producer. L is backends/cpu/isa.h's blocked_lanes(): the block oneDNN's
// kernels use on the ISA the backend runs (ONEDNN_MAX_CPU_ISA caps it), so no reorder remains
// between the blocked tensors and the convolutions (tests/cpp/test_blocked_isa.cpp counts them).
//
// How it decides:
//   - Layout-aware nodes (conv2d, conv2d_fused, their two backward ops, max_pool2d and its
//     backward, batch_norm and its backward, pointwise ops whose operands all have the
//     output's shape, and channel concats of whole L-channel blocks: YOLOv5's C3 and neck) tie
//     their activations into classes (union-find): a pool's input and output, an add's operands,
//     share one layout. A convolution ties only its y side (output, residual; dy of the backward
//     ops); its x side (input; dx) is a class of its own, because oneDNN reads and writes the two
//     sides in independent layouts.
//   - A class is blocked when the reorders it saves (its tensors read or written by convs)
//     outweigh the re-layouts it needs at its boundary (to_blocked where a member comes from a
//     node that is not layout-aware or from a graph input, from_blocked where one is read by
//     such a node or returned), counted in elements.
//   - Never blocked: non-float32 or non-4-D values; values with fewer than L channels or more
//     than a quarter of padding (the network input, LeNet-5's 6-channel maps: every blocked op
//     would move up to L/C times the bytes; measured slower); values an effect reads or mutates.
//     With C not a multiple of L only ops that keep zeros zero (relu, relu_grad, add, sub, mul,
//     neg) count as pointwise-aware, so padding stays zero.
// SPORE_NO_BLOCKED_LAYOUT=1 turns the pass off (for A/B measurements).
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/isa.h"
#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "ops/blocked.h"
#include "ops/op.h"

namespace spore::cpu {
using namespace graph;
namespace {
using ops::OpId;

bool disabled() {
  const char* e = std::getenv("SPORE_NO_BLOCKED_LAYOUT");
  return e && *e && std::string(e) != "0";
}

// Channel counts whose blocks would be mostly padding: every blocked op would move up to L/C
// times the bytes (LeNet-5's 6 channels in 16 lanes: 2.7x, measured a net loss). At most a quarter
// extra.
bool too_much_padding(int64_t C, int64_t L) {
  return C < L || 4 * ops::blocked::blocks(C, L) * L > 5 * C;
}

// (The blocked kernels are the CPU backend's.)
bool plain_4d_f32(const Value* v) {
  return v->dtype == kFloat32 && v->shape.size() == 4 && v->device.type == DeviceType::CPU;
}

bool is_conv(OpId op) {
  return op == OpId::Conv2d || op == op::Conv2dFused() || op == OpId::Conv2dBackwardData ||
         op == OpId::Conv2dBackwardWeight;
}

// Pointwise ops that map all-zero inputs to zero, so padding lanes stay zero (ops.def trait).
bool keeps_zero(OpId op) { return ops::op_def(op).traits.zero_preserving; }

// A slot: one activation operand of a layout-aware node. Input slots have input >= 0, output
// slots output >= 0. side: 'x' / 'y' for a convolution's two sides, 'p' for the others (one
// layout for all their activations).
struct Slot {
  int input = -1, output = -1;
  char side = 'p';
};

// The activation slots of n when it can run blocked in L lanes, else empty.
std::vector<Slot> aware_slots(const Node& n, int64_t L) {
  const OpId op = n.op;
  std::vector<Slot> s;
  auto in = [&](int i, char side) { s.push_back({i, -1, side}); };
  auto out = [&](int o, char side) { s.push_back({-1, o, side}); };
  if (is_conv(op)) {
    if (!plain_4d_f32(n.inputs[0]) || n.attrs.get_int("groups", 1) != 1) return {};
    if (op == OpId::Conv2d || op == op::Conv2dFused()) {
      in(0, 'x');
      out(0, 'y');
      if (op == op::Conv2dFused() && n.attrs.get_bool("has_residual", false))
        in(int(n.inputs.size()) - 1, 'y');
    } else if (op == OpId::Conv2dBackwardData) {
      in(0, 'y');
      out(0, 'x');
    } else {  // backward weight: (dy, x)
      in(0, 'y');
      in(1, 'x');
    }
  } else if (op == OpId::MaxPool2d) {
    in(0, 'p');
    out(0, 'p');
    out(1, 'p');
  } else if (op == OpId::MaxPool2dBackward || op == OpId::BatchNormBackward) {
    in(0, 'p');
    in(1, 'p');  // indices / x
    out(0, 'p');
  } else if (op == OpId::BatchNorm) {
    in(0, 'p');
    out(0, 'p');
  } else if (op == OpId::Concat) {  // channels: blocked, the concat of the inputs' channel blocks
    const Value* o = n.outputs[0];
    if (!plain_4d_f32(o) || ops::normalize_axis(n.attrs.get_int("axis"), 4) != 1) return {};
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!plain_4d_f32(n.inputs[i]) || n.inputs[i]->shape[1] % L != 0) return {};
      in(int(i), 'p');
    }
    out(0, 'p');
  } else if (op == OpId::Sum) {  // a conv bias gradient: sum over (N, H, W) -> (C)
    if (n.attrs.get_ints("axes") != std::vector<int64_t>{0, 2, 3} ||
        n.attrs.get_bool("keepdims", false) || !plain_4d_f32(n.inputs[0]))
      return {};
    in(0, 'p');
  } else {
    const bool pointwise = op == OpId::FusedElementwise ||
                           (n.def().has(ops::kElementwise) && !n.is_view() && !n.is_effect());
    if (!pointwise || n.outputs.size() != 1 || !plain_4d_f32(n.outputs[0])) return {};
    const Shape& shape = n.outputs[0]->shape;
    if (shape[1] % L != 0 && (op == OpId::FusedElementwise || !keeps_zero(op))) return {};
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (v->numel() == 1 && v->dtype == kFloat32) continue;  // a scalar broadcasts in any layout
      if (v->shape != shape || v->dtype != kFloat32) return {};
      in(int(i), 'p');
    }
    out(0, 'p');
    return s;
  }
  // Pool and batch-norm activations must be 4-D float32 (indices are int64: same layout).
  for (const Slot& sl : s) {
    const Value* v = sl.input >= 0 ? n.inputs[size_t(sl.input)] : n.outputs[size_t(sl.output)];
    const bool dtype_ok = v->dtype == kFloat32 || v->dtype == kInt64;
    if (v->shape.size() != 4 || !dtype_ok || v->device.type != DeviceType::CPU) return {};
  }
  return s;
}

struct UnionFind {
  std::unordered_map<const Value*, const Value*> parent;
  const Value* find(const Value* v) {
    auto it = parent.try_emplace(v, v).first;
    if (it->second == v) return v;
    const Value* r = find(it->second);
    parent[v] = r;
    return r;
  }
  void unite(const Value* a, const Value* b) { parent[find(a)] = find(b); }
};

}  // namespace

size_t blocked_layout(Graph& g) {
  if (disabled()) return 0;
  // The channel block of the ISA the convolutions run (isa.h): 16 on AVX-512, 8 on AVX2.
  const int64_t L = blocked_lanes();
  auto blocked_shape = [L](const Shape& nchw) { return ops::blocked::shape(nchw, L); };
  // 1. Slots of the layout-aware nodes; values tied into classes.
  std::unordered_map<const Node*, std::vector<Slot>> slots;
  UnionFind uf;
  std::unordered_set<const Value*> pinned;  // must stay plain
  for (const Value* v : mutated_values(g)) pinned.insert(v);
  for (const auto& up : g.nodes) {
    const Node& n = *up;
    if (n.is_effect())
      for (const Value* v : n.inputs) pinned.insert(v);
    std::vector<Slot> s = aware_slots(n, L);
    if (s.empty()) continue;
    const Value* tie = nullptr;  // the 'p' / 'y' side's first value
    for (const Slot& sl : s) {
      const Value* v = sl.input >= 0 ? n.inputs[size_t(sl.input)] : n.outputs[size_t(sl.output)];
      uf.find(v);
      if (v->dtype == kFloat32 && (v->shape.size() != 4 || too_much_padding(v->shape[1], L)))
        pinned.insert(v);
      if (sl.side == 'x') continue;
      if (tie)
        uf.unite(v, tie);
      else
        tie = v;
    }
    slots.emplace(&n, std::move(s));
  }
  if (slots.empty()) return 0;

  // 2. Per class: elements of conv reorders saved minus elements of boundary re-layouts needed.
  std::unordered_map<const Value*, int> aware_reads, reads;  // by aware slots / by anyone
  std::unordered_map<const Value*, bool> aware_producer;
  std::unordered_map<const Value*, int64_t> gain;
  std::unordered_set<const Value*> bad_class;
  for (const auto& [node, s] : slots)
    for (const Slot& sl : s) {
      const Value* v =
          sl.input >= 0 ? node->inputs[size_t(sl.input)] : node->outputs[size_t(sl.output)];
      if (sl.input >= 0)
        ++aware_reads[v];
      else
        aware_producer[v] = true;
      if (is_conv(node->op) && v->dtype == kFloat32) gain[uf.find(v)] += v->numel();
    }
  for (const auto& n : g.nodes)
    for (const Value* v : n->inputs) ++reads[v];
  std::unordered_set<const Value*> returned(g.outputs.begin(), g.outputs.end());
  for (const auto& [v, root] : uf.parent) {
    const Value* r = uf.find(v);
    if (pinned.count(v)) bad_class.insert(r);
    if (v->dtype != kFloat32) continue;  // indices: produced and read only by aware pool nodes
    if (!aware_producer.count(v))
      gain[r] -= v->numel();  // to_blocked before its aware readers
    else if (reads[v] > aware_reads[v] || returned.count(v))
      gain[r] -= v->numel();  // from_blocked
  }
  // Indices of a max pool whose backward cannot run blocked would have no plain twin.
  for (const auto& [v, root] : uf.parent)
    if (v->dtype == kInt64 && (reads[v] > aware_reads[v] || returned.count(v)))
      bad_class.insert(uf.find(v));
  auto blocked = [&](const Value* v) {
    const Value* r = uf.find(v);
    return !bad_class.count(r) && gain[r] > 0;
  };

  // 3. Rewrite. Aware nodes in blocked classes get the flags; produced values become 5-D; the
  //    boundaries get to_blocked / from_blocked.
  size_t changed = 0;
  std::unordered_map<const Value*, Value*> blocked_twin;  // plain value -> its to_blocked
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    auto it = slots.find(n);
    if (it == slots.end()) continue;
    bool any = false, bx = false, by = false;
    for (const Slot& sl : it->second) {
      Value* v = sl.input >= 0 ? n->inputs[size_t(sl.input)] : n->outputs[size_t(sl.output)];
      if (!blocked(v)) continue;
      any = true;
      (sl.side == 'x' ? bx : by) = true;
      if (sl.input >= 0 && !aware_producer.count(v)) {  // a plain producer: re-layout once
        Value*& twin = blocked_twin[v];
        if (!twin) {
          Node* t = g.insert_node(i++, op::ToBlocked(), {v}, ops::Attrs().set("lanes", L),
                                  {{blocked_shape(v->shape), v->dtype}});
          t->precision = n->precision;
          twin = t->outputs[0];
        }
        n->inputs[size_t(sl.input)] = twin;
      }
    }
    if (!any) continue;
    // 'p' nodes run blocked as a whole: their class is one (all slots agree).
    if (is_conv(n->op)) {
      n->attrs.set("blocked_x", bx).set("blocked_y", by).set("lanes", L);
    } else if (n->op == OpId::FusedElementwise) {
      n->attrs.set("shape", blocked_shape(n->outputs[0]->shape));
    } else if (n->op == OpId::Concat) {
      n->attrs.set("axis", int64_t(1));  // (N, Cb, H, W, L): the channel blocks
    } else if (n->op != OpId::Sum && !n->def().has(ops::kElementwise)) {  // pools, batch norms
      n->attrs.set("blocked", true);
      // The pool's output padding lanes (y and indices) are zeroed only when it knows C.
      if (n->op == OpId::MaxPool2d) n->attrs.set("channels", n->outputs[0]->shape[1]);
    }
    ++changed;
    if (n->op == OpId::Sum) {  // (N, Cb, H, W, L) summed over (0, 2, 3) is (Cb, L): -> (C)
      Value* v = n->outputs[0];
      const int64_t C = v->shape[0], Cb = ops::blocked::blocks(C, L);
      v->shape = {Cb, L};
      v->strides = contiguous_strides(v->shape);
      Node* r = g.insert_node(i + 1, OpId::Reshape, {v}, ops::Attrs().set("shape", Shape{Cb * L}),
                              {{Shape{Cb * L}, v->dtype}});
      Node* sl = g.insert_node(i + 2, OpId::Slice, {r->outputs[0]},
                               ops::Attrs()
                                   .set("dim", int64_t(0))
                                   .set("start", int64_t(0))
                                   .set("end", C)
                                   .set("step", int64_t(1)),
                               {{Shape{C}, v->dtype}});
      r->precision = sl->precision = n->precision;
      for (size_t j = i + 3; j < g.nodes.size(); ++j)
        for (Value*& in : g.nodes[j]->inputs)
          if (in == v) in = sl->outputs[0];
      for (Value*& o : g.outputs)
        if (o == v) o = sl->outputs[0];
      i += 2;
      continue;
    }
    // Outputs: 5-D now; plain readers (and graph outputs) get a from_blocked right after.
    for (const Slot& sl : it->second) {
      if (sl.output < 0) continue;
      Value* v = n->outputs[size_t(sl.output)];
      if (!blocked(v)) continue;
      const Shape plain = v->shape;
      v->shape = blocked_shape(plain);
      v->strides = contiguous_strides(v->shape);
      if (v->dtype != kFloat32 || (reads[v] == aware_reads[v] && !returned.count(v))) continue;
      Node* f = g.insert_node(i + 1, op::FromBlocked(), {v}, ops::Attrs().set("channels", plain[1]),
                              {{plain, v->dtype}});
      f->precision = n->precision;
      Value* p = f->outputs[0];
      // Readers that are not blocked slots of v read the plain twin.
      for (size_t j = i + 2; j < g.nodes.size(); ++j) {
        Node* r = g.nodes[j].get();
        auto rs = slots.find(r);
        for (size_t k = 0; k < r->inputs.size(); ++k) {
          if (r->inputs[k] != v) continue;
          bool aware = false;
          if (rs != slots.end())
            for (const Slot& q : rs->second) aware = aware || q.input == int(k);
          if (!aware) r->inputs[k] = p;
        }
      }
      for (Value*& o : g.outputs)
        if (o == v) o = p;
    }
  }
  return changed;
}

SPORE_REGISTER_PASS(CPU, "blocked_layout", kOrderBlockedLayout, blocked_layout);

}  // namespace spore::cpu
