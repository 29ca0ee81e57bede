// The PyNative backward engine: walks the tape from the root in reverse creation order, calls each
// op's gradient rule (written with ops, so create_graph gives higher-order gradients), sums
// gradients that fan in, and reduces broadcast gradients to their input's shape.
#include <algorithm>
#include <atomic>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "spore/autograd.h"
#include "spore/ops.h"

namespace spore {
namespace {
std::atomic<uint64_t> g_seq{0};
}  // namespace

Tensor stop_gradient(const Tensor& x) { return x.detach(); }
void Tensor::backward(const Tensor& gradient) const { autograd::backward(*this, gradient); }

namespace autograd {

bool should_record(const ops::OpDef& def, const ops::Tensors& inputs) {
  if (!is_grad_enabled() || def.has(ops::kNonDiff) || def.has(ops::kInplace)) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// The symbolic zero cotangents of the backward passes now running on this thread: gradient rules
// ask is_zero_cotangent() to skip terms that vanish (a traced tensor's values are unknown). The
// tensors are held, not just their addresses, so a freed one's address cannot be reused by a
// real gradient during the pass.
thread_local std::vector<Tensor> t_zero_cotangents;

bool is_zero_cotangent(const Tensor& g) {
  if (!g.defined()) return false;
  for (const Tensor& z : t_zero_cotangents)
    if (z.is_same(g)) return true;
  return false;
}

void record(ops::OpId op, const ops::Attrs& attrs, const ops::Tensors& inputs,
            ops::Tensors& outputs) {
  auto node = std::make_shared<Node>();
  node->op = op;
  node->attrs = attrs;
  node->inputs = inputs;
  node->seq = g_seq.fetch_add(1);
  node->precision = ops::current_precision();
  node->outputs.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->outputs.push_back(outputs[i].detach());
    node->out_meta.push_back({outputs[i].shape(), outputs[i].dtype()});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl& o = outputs[i].impl();
    if (!is_floating(o.dtype)) continue;  // integer outputs (indices) carry no gradient
    o.requires_grad = true;
    o.grad_fn = node;
    o.output_nr = int(i);
  }
}

namespace {

Tensor accumulate(const Tensor& acc, const Tensor& g) { return acc.defined() ? add(acc, g) : g; }

// Brings a gradient back to its input's shape, dtype and device.
Tensor fit_to(const Tensor& g, const Tensor& input) {
  Tensor r = g;
  if (r.device() != input.device())
    r = r.to(input.device());  // a host scalar that joined a device op
  if (r.shape() != input.shape()) r = sum_to_shape(r, input.shape());
  if (r.dtype() != input.dtype()) r = cast(r, input.dtype());
  return r;
}

// The cotangent of an output nobody used. While tracing (Graph mode) it is a traced broadcast of
// a zero scalar, so gradient rules see a symbolic tensor (they must not read it on the host) and
// the graph passes fold it.
Tensor zero_cotangent(const ops::TensorMeta& m, Device device) {
  if (ops::trace_hook()) {
    Tensor z = zeros({}, m.dtype, device).expand(m.shape);
    t_zero_cotangents.push_back(z);
    return z;
  }
  return zeros(m.shape, m.dtype, device);
}

struct ZeroCotangentsReset {  // forgets this pass's zeros when it ends (nested passes nest)
  size_t mark = t_zero_cotangents.size();
  ~ZeroCotangentsReset() { t_zero_cotangents.resize(mark); }
};

struct Pending {
  std::unordered_map<Node*, ops::Tensors> node_grads;  // per node, per output
  std::unordered_map<TensorImpl*, Tensor> leaf_grads;  // per leaf tensor
};

// Runs the tape backwards from root with cotangent seed; fills pending.leaf_grads.
// leaf_ready (optional): called with a leaf and its gradient once no node left can add to it.
using LeafReady = std::function<void(TensorImpl*, const Tensor&)>;
thread_local int t_backward_depth = 0;
struct InBackward {
  InBackward() { ++t_backward_depth; }
  ~InBackward() { --t_backward_depth; }
};

void run_backward(const Tensor& root, const Tensor& seed, Pending& pending, bool create_graph,
                  const LeafReady& leaf_ready = nullptr) {
  InBackward in_backward;
  ZeroCotangentsReset forget_zeros;
  std::unique_ptr<NoGradGuard> no_grad;
  if (!create_graph) no_grad = std::make_unique<NoGradGuard>();
  if (!root.impl().grad_fn) {  // the root is a leaf itself
    pending.leaf_grads[root.impl_ptr().get()] = seed;
    return;
  }
  // Collect reachable nodes.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack{root.impl().grad_fn.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    order.push_back(n);
    for (const Tensor& in : n->inputs)
      if (in.defined() && in.impl().grad_fn) stack.push_back(in.impl().grad_fn.get());
  }
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->seq > b->seq; });

  // fire_at[p]: the leaves whose last consumer is order[p] (their gradient is final after it).
  std::vector<std::vector<TensorImpl*>> fire_at;
  if (leaf_ready) {
    std::unordered_map<TensorImpl*, size_t> last;
    for (size_t p = 0; p < order.size(); ++p)
      for (const Tensor& in : order[p]->inputs)
        if (in.defined() && !in.impl().grad_fn && in.requires_grad()) last[in.impl_ptr().get()] = p;
    fire_at.resize(order.size());
    for (auto& [impl, p] : last) fire_at[p].push_back(impl);
  }
  auto fire = [&](size_t p) {
    if (!leaf_ready) return;
    for (TensorImpl* impl : fire_at[p]) {
      auto lg = pending.leaf_grads.find(impl);
      if (lg != pending.leaf_grads.end() && lg->second.defined()) leaf_ready(impl, lg->second);
    }
  };

  Node* rn = root.impl().grad_fn.get();
  pending.node_grads[rn].resize(rn->outputs.size());
  pending.node_grads[rn][size_t(root.impl().output_nr)] = seed;

  for (size_t pos = 0; pos < order.size(); ++pos) {
    Node* n = order[pos];
    auto it = pending.node_grads.find(n);
    if (it == pending.node_grads.end()) {
      fire(pos);
      continue;
    }
    ops::Tensors cot = std::move(it->second);
    pending.node_grads.erase(it);
    cot.resize(n->outputs.size());
    for (size_t i = 0; i < cot.size(); ++i)
      if (!cot[i].defined() && is_floating(n->out_meta[i].dtype))
        cot[i] = zero_cotangent(n->out_meta[i], n->outputs[i].device());
    const ops::OpDef& def = ops::op_def(n->op);
    ops::VjpContext ctx{n->inputs, n->outputs, cot, n->attrs};
    ops::Tensors grads;
    {
      ops::PrecisionScope precision(
          n->precision);  // backward ops follow the forward op's precision
      grads = def.rules.vjp(ctx);
    }
    SPORE_ASSERT(grads.size() <= n->inputs.size(), "gradient rule of ", def.name, " returned ",
                 grads.size(), " gradients for ", n->inputs.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Tensor& in = n->inputs[i];
      if (!grads[i].defined() || !in.defined() || !in.requires_grad()) continue;
      Tensor g = fit_to(grads[i], in);
      if (Node* p = in.impl().grad_fn.get()) {
        ops::Tensors& slot = pending.node_grads[p];
        slot.resize(p->outputs.size());
        slot[size_t(in.impl().output_nr)] = accumulate(slot[size_t(in.impl().output_nr)], g);
      } else {
        Tensor& lg = pending.leaf_grads[in.impl_ptr().get()];
        lg = accumulate(lg, g);
      }
    }
    fire(pos);
  }
}

Tensor default_seed(const Tensor& root, const Tensor& sens) {
  if (!sens.defined()) return ones(root.shape(), root.dtype(), root.device());
  SPORE_CHECK(sens.shape() == root.shape() || sens.numel() == 1, "grad: sens has shape ",
              shape_str(sens.shape()), " but the output has shape ", shape_str(root.shape()));
  const Tensor s = sens.to(root.device());
  return sens.shape() == root.shape()
             ? s
             : mul(ones(root.shape(), root.dtype(), root.device()), s.to(root.dtype()));
}

}  // namespace

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const GradOptions& opts) {
  SPORE_CHECK(output.defined(), "grad: the function returned an undefined tensor");
  SPORE_CHECK_TYPE(is_floating(output.dtype()), "grad: the output must be floating point, got ",
                   dtype_name(output.dtype()));
  Pending pending;
  std::vector<bool> fired(opts.on_grad_ready ? inputs.size() : 0, false);
  LeafReady leaf_ready;
  if (opts.on_grad_ready) {
    std::unordered_map<TensorImpl*, std::vector<size_t>> index_of;
    for (size_t i = 0; i < inputs.size(); ++i) index_of[inputs[i].impl_ptr().get()].push_back(i);
    leaf_ready = [&opts, &fired, index_of = std::move(index_of)](TensorImpl* impl,
                                                                 const Tensor& g) {
      auto it = index_of.find(impl);
      if (it == index_of.end()) return;
      for (size_t i : it->second) {
        fired[i] = true;
        opts.on_grad_ready(i, g);
      }
    };
  }
  if (output.requires_grad())
    run_backward(output, default_seed(output, opts.sens), pending, opts.create_graph, leaf_ready);
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    auto it = pending.leaf_grads.find(in.impl_ptr().get());
    if (it != pending.leaf_grads.end() && it->second.defined())
      out.push_back(it->second);
    else
      out.push_back(zeros(in.shape(), in.dtype(), in.device()));
  }
  for (size_t i = 0; i < fired.size(); ++i)
    if (!fired[i]) opts.on_grad_ready(i, out[i]);
  return out;
}

void backward(const Tensor& root, const Tensor& gradient) {
  SPORE_CHECK(root.requires_grad(),
              "backward(): the tensor does not require grad and has no "
              "history; did you forget set_requires_grad() on the inputs, or run under no_grad?");
  SPORE_CHECK(gradient.defined() || root.numel() == 1,
              "backward(): a gradient must be given for a "
              "non-scalar output of shape ",
              shape_str(root.shape()));
  Pending pending;
  run_backward(root, default_seed(root, gradient), pending, false);
  for (auto& [impl, g] : pending.leaf_grads) {
    if (!g.defined()) continue;
    Tensor d = g.detach();
    impl->grad = impl->grad ? add(Tensor(impl->grad), d).impl_ptr() : d.contiguous().impl_ptr();
  }
}

bool in_backward() { return t_backward_depth > 0; }

// The dispatcher (src/ops, a layer below) offers every op it runs to the tape through this hook.
Tensor producer_input(const Tensor& x, ops::OpId* op) {
  const auto& fn = x.impl().grad_fn;
  if (!fn || fn->inputs.size() != 1) return {};
  *op = fn->op;
  return fn->inputs[0];
}
[[maybe_unused]] const bool tape_hook_registered = [] {
  ops::set_tape_hook({.should_record = should_record,
                      .record = record,
                      .is_zero_cotangent = is_zero_cotangent,
                      .producer_input = producer_input});
  return true;
}();

}  // namespace autograd
}  // namespace spore
