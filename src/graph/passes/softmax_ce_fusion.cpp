// Softmax + cross-entropy fusion. nn::SoftmaxCrossEntropyWithLogits (sparse labels) traces to
//   forward   logp = log_softmax(z, -1); t = gather(logp, -1, idx (N, 1)); loss = -t.reshape(N)
//   backward  d = scatter_add(zeros (N, C), -1, idx, G (N, 1))      (gather's gradient; G = dL/dt)
//             dz = d - exp(logp) * sum(d, -1, keepdims)            (log_softmax's gradient)
// Since every row of d holds G at the label and zeros elsewhere, dz = -G * (softmax(z) - onehot),
// so one SoftmaxCrossEntropyFused(z, labels) -> (loss (N), dlogits (N, C)) computes both with one
// exp pass, and the backward becomes dz = dlogits * neg(G) (G is usually a constant, -1/N for a
// mean, which constant folding then turns into one multiply by a constant).
// Values are replaced only by equal values, so any other reader of logp, d or the sum keeps its
// nodes; the forward is fused even when the backward is absent (evaluation).
#include <algorithm>

#include "graph/passes.h"

namespace spore::graph {
namespace {
using ops::OpId;

constexpr int64_t kMaxScan = int64_t(1) << 22;  // elements of the zeros constant inspected

bool is_class_axis(int64_t axis) { return axis == -1 || axis == 1; }  // of a rank-2 tensor

bool is_zeros(const Value* v) {
  if (v->kind != ValueKind::kConstant || v->numel() > kMaxScan) return false;
  for (double e : v->tensor.to_vector<double>())
    if (e != 0) return false;
  return true;
}

std::vector<Node*> readers_of(const Graph& g, const Value* v) {
  std::vector<Node*> r;
  for (const auto& n : g.nodes)
    if (std::find(n->inputs.begin(), n->inputs.end(), v) != n->inputs.end()) r.push_back(n.get());
  return r;
}

bool is_output(const Graph& g, const Value* v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// The sub node computing log_softmax's gradient from d = scatter_add(zeros, idx, G), or null.
Node* find_backward(const Graph& g, const Value* logp, const Value* idx, Node*& scatter) {
  for (Node* s : readers_of(g, idx)) {
    if (s->op != OpId::ScatterAdd || s->inputs[1] != idx ||
        !is_class_axis(s->attrs.get_int("axis")))
      continue;
    const Value* d = s->outputs[0];
    const Value* G = s->inputs[2];
    if (!is_zeros(s->inputs[0]) || d->shape != logp->shape || G->shape != idx->shape ||
        G->dtype != logp->dtype)
      continue;
    for (Node* sum : readers_of(g, d)) {
      if (sum->op != OpId::Sum || !sum->attrs.get_bool("keepdims", false)) continue;
      const auto axes = sum->attrs.get_ints("axes", {});
      if (axes.size() != 1 || !is_class_axis(axes[0])) continue;
      for (Node* mul : readers_of(g, sum->outputs[0])) {
        if (mul->op != OpId::Mul) continue;
        const Value* e = mul->inputs[0] == sum->outputs[0] ? mul->inputs[1] : mul->inputs[0];
        if (!e->producer || e->producer->op != OpId::Exp || e->producer->inputs[0] != logp)
          continue;
        for (Node* sub : readers_of(g, mul->outputs[0]))
          if (sub->op == OpId::Sub && sub->inputs[0] == d && sub->inputs[1] == mul->outputs[0]) {
            scatter = s;
            return sub;
          }
      }
    }
  }
  return nullptr;
}

// One match: the gather node of the pattern (forward), its log_softmax input's logits.
bool fuse_one(Graph& g, Node* gather) {
  Value* logp = gather->inputs[0];
  Value* idx = gather->inputs[1];
  const Node* ls = logp->producer;
  if (!ls || ls->op != OpId::LogSoftmax || logp->shape.size() != 2 ||
      !is_class_axis(ls->attrs.get_int("axis")) || !is_class_axis(gather->attrs.get_int("axis")))
    return false;
  Value* z = ls->inputs[0];
  const int64_t n = logp->shape[0];
  if (idx->shape != Shape{n, 1} || !(idx->dtype == kInt32 || idx->dtype == kInt64)) return false;
  // Labels (N): the value idx was reshaped from, else a reshape of idx.
  Value* labels = nullptr;
  if (idx->producer && idx->producer->op == OpId::Reshape &&
      idx->producer->inputs[0]->shape == Shape{n})
    labels = idx->producer->inputs[0];
  Node* scatter = nullptr;
  Node* sub = find_backward(g, logp, idx, scatter);

  size_t at = g.index_of(gather);
  if (!labels) {
    Node* r = g.insert_node(at++, OpId::Reshape, {idx}, ops::Attrs().set("shape", Shape{n}),
                            {{Shape{n}, idx->dtype}});
    r->precision = gather->precision;
    labels = r->outputs[0];
  }
  Node* f = g.insert_node(at++, OpId::SoftmaxCrossEntropyFused, {z, labels}, {},
                          {{Shape{n}, z->dtype}, {z->shape, z->dtype}});
  f->precision = ls->precision;
  Value* loss = f->outputs[0];
  Value* dlogits = f->outputs[1];

  // Forward: -reshape(t, N) is the loss itself; any other reader of t gets reshape(-loss, (N, 1)).
  Value* t = gather->outputs[0];
  bool other_readers = is_output(g, t);
  for (Node* r : readers_of(g, t)) {
    std::vector<Node*> negs =
        r->op == OpId::Reshape && r->outputs[0]->shape == Shape{n} && !is_output(g, r->outputs[0])
            ? readers_of(g, r->outputs[0])
            : std::vector<Node*>{};
    const bool all_neg = !negs.empty() && std::all_of(negs.begin(), negs.end(),
                                                      [](Node* x) { return x->op == OpId::Neg; });
    if (!all_neg) {
      other_readers = true;
      continue;
    }
    for (Node* ng : negs) g.replace_all_uses(ng->outputs[0], loss);
  }
  if (other_readers) {
    Node* ng = g.insert_node(at++, OpId::Neg, {loss}, {}, {{Shape{n}, z->dtype}});
    Node* r = g.insert_node(at++, OpId::Reshape, {ng->outputs[0]},
                            ops::Attrs().set("shape", Shape{n, 1}), {{Shape{n, 1}, z->dtype}});
    ng->precision = r->precision = gather->precision;
    g.replace_all_uses(t, r->outputs[0]);
  }

  // Backward: dz = dlogits * -G, placed where the sub was.
  if (sub) {
    Value* G = scatter->inputs[2];
    size_t sp = g.index_of(sub);
    Node* ng = g.insert_node(sp, OpId::Neg, {G}, {}, {{G->shape, G->dtype}});
    Node* m =
        g.insert_node(sp + 1, OpId::Mul, {dlogits, ng->outputs[0]}, {}, {{z->shape, z->dtype}});
    ng->precision = m->precision = sub->precision;
    g.replace_all_uses(sub->outputs[0], m->outputs[0]);
  }
  return true;
}

}  // namespace

size_t fuse_softmax_cross_entropy(Graph& g) {
  size_t fused = 0;
  std::vector<Node*> gathers;
  for (const auto& n : g.nodes)
    if (n->op == OpId::Gather) gathers.push_back(n.get());
  for (Node* ga : gathers) fused += fuse_one(g, ga) ? 1 : 0;
  if (fused) dead_code_elimination(g);  // the replaced log_softmax / gather / scatter chain
  return fused;
}

}  // namespace spore::graph
