// Algebraic simplification: x * sigmoid(x) -> silu(x); identities that remove a node (x*1, x+0,
// x-0, x/1, cast to the same dtype, neg(neg(x)), f(f(x)) for ops whose ops.def trait says
// idempotent, reshape to the same shape, permute chains that cancel) or shorten a chain
// (reshape(reshape(x)) -> reshape(x); permute(permute(x)) -> one permute), and moves transposes
// into matmuls: transpose(a @ b) -> b^T @ a^T when nothing else reads a @ b (a Dense weight's
// gradient is traced as (x^T @ dy)^T: a strided view the optimizer would walk column by column;
// as dy^T @ x it is a contiguous matmul output, the transposes being views oneDNN reads by
// strides), and moves relu_grad in front of a max pool's backward, where it masks 4x fewer
// elements: relu_grad(max_pool2d_backward(dy, idx), x) with pool = max_pool2d(relu(x) or x) ->
// max_pool2d_backward(relu_grad(dy, pool_out), idx). Exact: the backward writes each window's dy
// at its argmax p only, and pool_out of that window is the input at p, so both forms test the
// same value > 0 (NaN included) for every term. And it applies a pointwise op before a reshape or
// permute rather than after (f(permute(x)) -> copy(permute(f(x)))), so the op runs on contiguous
// memory and can fuse into x's producer. A node's output is
// replaced by x only when x has the output's exact shape, dtype and strides, so consumers (views
// especially) see the same layout. The dead nodes are left for dead_code_elimination.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {
namespace {
constexpr int64_t kMaxScan = 1 << 16;  // elements of a constant inspected for 0/1

bool is_constant_equal(const Value* v, double value) {
  if (v->kind != ValueKind::kConstant || v->numel() > kMaxScan) return false;
  for (double e : v->tensor.to_vector<double>())
    if (e != value) return false;
  return true;
}
bool same_layout(const Value* a, const Value* b) {
  return a->shape == b->shape && a->dtype == b->dtype && a->strides == b->strides;
}

bool is_transpose_2d(const Node& n) {
  return n.op == ops::OpId::Permute && n.attrs.get_ints("axes") == std::vector<int64_t>{1, 0};
}

// A 2-D transpose view of v inserted at pos (strides swapped: no data moves).
Value* transpose_view(Graph& g, size_t pos, Value* v, const Node& like) {
  Node* t = g.insert_node(pos, ops::OpId::Permute, {v},
                          ops::Attrs().set("axes", std::vector<int64_t>{1, 0}),
                          {{Shape{v->shape[1], v->shape[0]}, v->dtype}});
  t->precision = like.precision;
  Value* o = t->outputs[0];
  o->strides = {v->strides[1], v->strides[0]};
  o->offset = v->offset;
  return o;
}

// transpose(a @ b) -> b^T @ a^T (2-D, the product read only by the transpose).
size_t transpose_matmul_products(Graph& g) {
  std::unordered_map<const Value*, int> reads;
  std::unordered_set<const Value*> viewed;  // read by a view (whose strides assume its input's)
  for (const auto& n : g.nodes)
    for (const Value* in : n->inputs) {
      ++reads[in];
      if (n->is_view()) viewed.insert(in);
    }
  for (const Value* o : g.outputs) reads[o] += 2;
  size_t changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    Node* mm = n->inputs.empty() ? nullptr : n->inputs[0]->producer;
    if (!is_transpose_2d(*n) || !mm || mm->op != ops::OpId::Matmul || mm->inputs.size() != 2 ||
        mm->inputs[0]->shape.size() != 2 || mm->inputs[1]->shape.size() != 2 ||
        reads[n->inputs[0]] != 1 || viewed.count(n->outputs[0]))
      continue;
    Value *a = mm->inputs[0], *b = mm->inputs[1];
    Value* bt = transpose_view(g, i++, b, *mm);
    Value* at = transpose_view(g, i++, a, *mm);
    Node* m = g.insert_node(i++, ops::OpId::Matmul, {bt, at}, mm->attrs,
                            {{n->outputs[0]->shape, n->outputs[0]->dtype}});
    m->precision = mm->precision;
    g.replace_all_uses(n->outputs[0], m->outputs[0]);  // n and mm are dead now
    ++changed;
  }
  return changed;
}

// relu_grad(max_pool2d_backward(dy, idx), x) -> max_pool2d_backward(relu_grad(dy, pool), idx).
size_t relu_grad_before_max_pool_backward(Graph& g) {
  auto reads = count_reads(g);
  size_t changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    if (n->op != ops::OpId::ReluGrad || n->attrs.get_bool("blocked", false)) continue;
    Node* bwd = n->inputs[0]->producer;
    if (!bwd || bwd->op != ops::OpId::MaxPool2dBackward || reads[n->inputs[0]] != 1 ||
        bwd->attrs.get_bool("blocked", false))
      continue;
    Node* pool = bwd->inputs[1]->producer;  // the indices' producer
    if (!pool || pool->op != ops::OpId::MaxPool2d) continue;
    const Value* y = pool->inputs[0];  // what was pooled: x itself, or relu(x)
    const Value* x = n->inputs[1];
    const bool same = y == x || (y->producer && y->producer->op == ops::OpId::Relu &&
                                 y->producer->inputs[0] == x);
    Value* dy = bwd->inputs[0];
    if (!same || dy->shape != pool->outputs[0]->shape || dy->dtype != pool->outputs[0]->dtype)
      continue;
    Node* rg = g.insert_node(i++, ops::OpId::ReluGrad, {dy, pool->outputs[0]}, n->attrs,
                             {{dy->shape, dy->dtype}});
    rg->precision = n->precision;
    Node* b = g.insert_node(i++, ops::OpId::MaxPool2dBackward, {rg->outputs[0], bwd->inputs[1]},
                            bwd->attrs, {{n->outputs[0]->shape, n->outputs[0]->dtype}});
    b->precision = bwd->precision;
    g.replace_all_uses(n->outputs[0], b->outputs[0]);  // n and bwd are dead now
    ++changed;
  }
  return changed;
}

// x * sigmoid(x) -> silu(x) (how ONNX, which has no SiLU op, spells YOLOv5's activation), when
// nothing else reads the sigmoid: a backend then fuses silu into the convolution before it. The
// same values: the silu kernel computes x * sigmoid(x).
size_t mul_sigmoid_to_silu(Graph& g) {
  auto reads = count_reads(g);
  size_t changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    if (n->op != ops::OpId::Mul || n->inputs.size() != 2) continue;
    for (int k = 0; k < 2; ++k) {
      Value* x = n->inputs[size_t(k)];
      const Value* s = n->inputs[size_t(1 - k)];
      const Node* sig = s->producer;
      if (!sig || sig->op != ops::OpId::Sigmoid || sig->inputs[0] != x || reads[s] != 1 ||
          x->shape != n->outputs[0]->shape || x->dtype != n->outputs[0]->dtype)
        continue;
      Node* silu = g.insert_node(i++, ops::OpId::Silu, {x}, {}, {{x->shape, x->dtype}});
      silu->precision = n->precision;
      g.replace_all_uses(n->outputs[0], silu->outputs[0]);  // n and the sigmoid are dead now
      ++changed;
      break;
    }
  }
  return changed;
}

// f(view(x)) -> view(f(x)) for a pointwise f of one input that keeps its dtype (sigmoid, exp,
// ...) and a reshape or permute view that nothing but f reads, of a contiguous x that nothing but
// the view reads: f then runs on contiguous memory next to x's producer, which can take it (a conv
// fuses it as a post-op: YOLOv5's detect head applies its sigmoid after a reshape and a permute).
// A strided view (the permute) gets a copy after it, so f's readers still see a contiguous output,
// as they were traced against: the strided walk is then a plain copy, not an exp per element.
// Exact: f is applied to the same elements.
size_t unary_before_layout_views(Graph& g) {
  auto reads = count_reads(g);
  size_t changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node* n = g.nodes[i].get();
    if (!n->def().has(ops::kElementwise) || !n->def().has(ops::kUnary) ||
        n->def().has(ops::kRandom) || n->is_effect() || n->inputs.size() != 1 ||
        n->outputs.size() != 1)
      continue;
    Value* a = n->inputs[0];
    Node* v = a->producer;
    if (!v || (v->op != ops::OpId::Permute && v->op != ops::OpId::Reshape) || reads[a] != 1)
      continue;
    Value* x = v->inputs[0];
    const Value* y = n->outputs[0];
    if (x->kind != ValueKind::kComputed || reads[x] != 1 || !x->is_contiguous() ||
        y->dtype != x->dtype || !y->is_contiguous())
      continue;
    const bool strided = !a->is_contiguous();
    Node* f = g.insert_node(g.index_of(v), n->op, {x}, n->attrs, {{x->shape, x->dtype}});
    f->precision = n->precision;
    v->inputs[0] = f->outputs[0];  // contiguous as x was: the view's strides stay right
    Value* out = a;
    if (strided) {
      Node* copy = g.insert_node(g.index_of(n), ops::OpId::Copy, {a}, {}, {{y->shape, y->dtype}});
      copy->precision = n->precision;
      out = copy->outputs[0];
    }
    g.replace_all_uses(n->outputs[0], out);  // n is dead now
    i = g.index_of(n);
    ++changed;
  }
  return changed;
}
}  // namespace

size_t algebraic_simplification(Graph& g) {
  size_t changed =
      transpose_matmul_products(g) + relu_grad_before_max_pool_backward(g) + mul_sigmoid_to_silu(g);
  auto forward_to = [&](Node* n, Value* x) {
    if (!same_layout(n->outputs[0], x)) return false;
    g.replace_all_uses(n->outputs[0], x);
    ++changed;
    return true;
  };
  for (auto& up : g.nodes) {
    Node* n = up.get();
    using ops::OpId;
    if (n->outputs.size() != 1) continue;
    Value* a = n->inputs.empty() ? nullptr : n->inputs[0];
    Value* b = n->inputs.size() > 1 ? n->inputs[1] : nullptr;
    // f(f(x)) -> f(x) for an idempotent op (ops.def trait: relu, abs, floor...).
    if (n->def().traits.idempotent && n->inputs.size() == 1 && a->producer &&
        a->producer->op == n->op && a->producer->attrs == n->attrs && forward_to(n, a))
      continue;
    switch (n->op) {
      case OpId::Mul:
        if (!(is_constant_equal(b, 1) && forward_to(n, a)))
          is_constant_equal(a, 1) && forward_to(n, b);
        break;
      case OpId::Add:
        if (!(is_constant_equal(b, 0) && forward_to(n, a)))
          is_constant_equal(a, 0) && forward_to(n, b);
        break;
      case OpId::Sub:
        is_constant_equal(b, 0) && forward_to(n, a);
        break;
      case OpId::Div:
        is_constant_equal(b, 1) && forward_to(n, a);
        break;
      case OpId::Cast:
        forward_to(n, a);  // same dtype (forward_to checks the layout)
        break;
      case OpId::Neg:
        if (a->producer && a->producer->op == OpId::Neg) forward_to(n, a->producer->inputs[0]);
        break;
      case OpId::Reshape:
        if (forward_to(n, a)) break;
        // reshape(reshape(x)) -> reshape(x) when x is contiguous (then any reshape is a view).
        if (a->producer && a->producer->op == OpId::Reshape &&
            a->producer->inputs[0]->is_contiguous()) {
          n->inputs[0] = a->producer->inputs[0];
          ++changed;
        }
        break;
      case OpId::Permute:
        if (a->producer && a->producer->op == OpId::Permute) {
          const auto& inner = a->producer->attrs.get_ints("axes");
          const auto& outer = n->attrs.get_ints("axes");
          std::vector<int64_t> axes(outer.size());
          for (size_t i = 0; i < outer.size(); ++i) axes[i] = inner[size_t(outer[i])];
          Value* x = a->producer->inputs[0];
          bool identity = true;
          for (size_t i = 0; i < axes.size(); ++i) identity = identity && axes[i] == int64_t(i);
          if (identity && forward_to(n, x)) break;
          if (!identity) {
            n->inputs[0] = x;
            n->attrs.set("axes", axes);
            ++changed;
          }
        }
        break;
      default:
        break;
    }
  }
  // After the identities (which shorten the view chains it would otherwise walk through).
  changed += unary_before_layout_views(g);
  return changed;
}

size_t point_relu_grads_at_outputs(Graph& g) {
  size_t changed = 0;
  std::unordered_map<const Value*, Value*> relu_of;  // x -> relu(x), for relus seen so far
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (n->op == ops::OpId::Relu && n->outputs[0]->shape == n->inputs[0]->shape)
      relu_of.emplace(n->inputs[0], n->outputs[0]);
    if (n->op != ops::OpId::ReluGrad) continue;
    auto it = relu_of.find(n->inputs[1]);
    if (it != relu_of.end() && it->second->dtype == n->inputs[1]->dtype) {
      n->inputs[1] = it->second;
      ++changed;
    }
  }
  return changed;
}

}  // namespace spore::graph
