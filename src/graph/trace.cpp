// The tracer (graph/trace.h) and jit() (spore/jit.h): signature cache, compile = trace + passes
// + memory plan + executor.
#include "graph/trace.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <sstream>
#include <unordered_map>

#include "autograd/node.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "spore/autograd.h"
#include "spore/jit.h"

namespace spore {
namespace {
thread_local int t_recompute_scope = 0;
std::atomic<int> g_next_recompute_scope{0};
}  // namespace
RecomputeScope::RecomputeScope() : prev_(t_recompute_scope) {
  t_recompute_scope = ++g_next_recompute_scope;
}
RecomputeScope::~RecomputeScope() { t_recompute_scope = prev_; }
int current_recompute_scope() { return t_recompute_scope; }
}  // namespace spore

namespace spore::graph {
namespace {

class Tracer : public ops::TraceHook {
 public:
  explicit Tracer(Graph& g) : g_(g) {}

  Tensor symbolic(const std::shared_ptr<Value>& v) {
    auto impl = std::make_shared<TensorImpl>();
    impl->shape = v->shape;
    impl->strides = v->strides;
    impl->offset = v->offset;
    impl->dtype = v->dtype;
    impl->device = v->device;
    impl->traced = v;
    return Tensor(std::move(impl));
  }

  Value* value_of(const Tensor& t) {
    const TensorImpl& impl = t.impl();
    if (impl.traced) {
      SPORE_CHECK(impl.traced->graph_tag == &g_,
                  "[jit] a symbolic tensor from another trace was "
                  "used while tracing graph ",
                  g_.name, "; return it from that function instead");
      return impl.traced.get();
    }
    SPORE_ASSERT(impl.storage, "a symbolic tensor without a traced value");
    auto it = captured_.find(&impl);
    if (it != captured_.end()) return it->second;
    Value* v = g_.add_capture(t);
    captured_[&impl] = v;
    return v;
  }

  ops::Tensors record(const ops::OpDef& def, const ops::Tensors& inputs, const ops::Attrs& attrs,
                      const ops::Metas& metas) override {
    std::vector<Value*> ins;
    for (const Tensor& t : inputs) ins.push_back(value_of(t));
    const Device device = ops::op_device(def, inputs);

    if (def.has(ops::kView)) {
      // Runs the view rule on a stand-in with the input's layout to learn the output's strides;
      // a reshape the layout does not allow gets the copy PyNative would have made.
      Tensor x = inputs[0];
      Shape st;
      if (def.id == ops::OpId::Reshape && !x.is_contiguous() &&
          !view_strides(x.shape(), x.strides(), metas[0].shape, &st)) {
        Node* c = g_.add_node(ops::OpId::Copy, {ins[0]}, {}, {{x.shape(), x.dtype()}});
        ins[0] = c->outputs[0];
        x = symbolic(g_.values.back());
      }
      Node* n = g_.add_node(def.id, ins, attrs, metas);
      mark(n);
      Tensor probe = def.rules.view(x, attrs, metas[0]);
      Value* o = n->outputs[0];
      o->strides = probe.strides();
      o->offset = probe.offset();
      return finish(def, inputs, attrs, n);
    }
    if (def.has(ops::kInplace))
      for (size_t i = 0; i + 1 < ins.size(); ++i)  // all but the last input are updated
        SPORE_CHECK_KIND(ErrorKind::NotImplemented,
                         view_base(ins[i])->kind != ValueKind::kPlaceholder, "[", def.name,
                         "] updates argument ", view_base(ins[i])->arg_index, " of jit function ",
                         g_.name,
                         " in place; a compiled graph works on a copy of its arguments, so "
                         "the caller would not see the update. Return the new value instead.");
    const ops::KernelEntry* k = ops::find_kernel(def.id, device.type);
    SPORE_CHECK_KIND(ErrorKind::NotImplemented, k, "[", def.name, "] has no kernel for device ",
                     device_type_name(device.type), " (Graph mode)");
    const DType key = !inputs.empty() ? inputs[0].dtype()
                      : metas.empty() ? kFloat32
                                      : metas[0].dtype;
    SPORE_CHECK_TYPE(k->supports(key), "[", def.name, "] does not support dtype ", dtype_name(key),
                     " on ", device_type_name(device.type));
    Node* n = g_.add_node(def.id, ins, attrs, metas);
    mark(n);
    return finish(def, inputs, attrs, n);
  }

 private:
  // What the passes need to know of where a node came from.
  static void mark(Node* n) {
    n->precision = ops::current_precision();
    n->backward = autograd::in_backward();
    if (!n->backward) n->recompute_scope = current_recompute_scope();
  }
  ops::Tensors finish(const ops::OpDef& def, const ops::Tensors& inputs, const ops::Attrs& attrs,
                      Node* n) {
    ops::Tensors outs;
    const size_t first = g_.values.size() - n->outputs.size();  // add_node made them last
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      SPORE_ASSERT(g_.values[first + i].get() == n->outputs[i], "tracer: output bookkeeping");
      outs.push_back(symbolic(g_.values[first + i]));
    }
    if (autograd::should_record(def, inputs)) autograd::record(def.id, attrs, inputs, outs);
    return outs;
  }
  Graph& g_;
  std::unordered_map<const TensorImpl*, Value*> captured_;
};

struct HookGuard {
  ops::TraceHook* prev;
  explicit HookGuard(ops::TraceHook* h) : prev(ops::trace_hook()) {
    SPORE_CHECK(prev == nullptr,
                "[jit] nested tracing is not supported: a jit function was called "
                "while another graph is being traced");
    ops::set_trace_hook(h);
  }
  ~HookGuard() { ops::set_trace_hook(prev); }
};

}  // namespace

std::unique_ptr<Graph> trace(const TracedFn& fn, const std::vector<Tensor>& example_args,
                             const std::string& name) {
  auto g = std::make_unique<Graph>();
  g->name = name;
  Tracer tracer(*g);
  std::vector<Tensor> args;
  for (size_t i = 0; i < example_args.size(); ++i) {
    const Tensor& a = example_args[i];
    SPORE_CHECK(a.defined(), "[jit] argument ", i, " is an undefined tensor");
    g->add_placeholder(int(i), a.shape(), a.dtype(), a.device());
    args.push_back(tracer.symbolic(g->values.back()));
  }
  g->num_args = int(example_args.size());
  {
    HookGuard guard(&tracer);
    std::vector<Tensor> outs = fn(args);
    for (const Tensor& o : outs) {
      SPORE_CHECK(o.defined(), "[jit] function ", name, " returned an undefined tensor");
      g->outputs.push_back(tracer.value_of(o));
    }
  }
  args.clear();
  // A captured tensor only the graph holds, whose storage nothing else shares (made during
  // tracing: zeros, ones, full...), can never change unless an effect in the graph mutates it:
  // a constant the passes may fold.
  const auto mutated = mutated_values(*g);
  for (Value* v : g->inputs)
    if (v->kind == ValueKind::kCapture && v->tensor.impl_ptr().use_count() == 1 &&
        v->tensor.impl().storage.use_count() == 1 &&  // not a view or detach() of live data
        std::find(mutated.begin(), mutated.end(), v) == mutated.end())
      v->kind = ValueKind::kConstant;
  return g;
}

// ---- jit --------------------------------------------------------------------------------------

struct Compiled {
  std::unique_ptr<Executor> exec;
  size_t nodes_traced = 0;
};

struct JitState {
  JitFunction::Fn fn;
  JitOptions opts;
  std::map<std::string, std::shared_ptr<Compiled>> cache;
  std::deque<std::string> order;  // insertion order, for eviction
  std::shared_ptr<Compiled> last;
  JitStats stats;
};

std::shared_ptr<Compiled> compile(const JitState& st, const std::vector<Tensor>& args) {
  auto g = trace(st.fn, args, st.opts.name);
  auto c = std::make_shared<Compiled>();
  c->nodes_traced = g->num_nodes();
  run_pipeline(*g);
  c->exec = std::make_unique<Executor>(std::shared_ptr<Graph>(std::move(g)));
  return c;
}

}  // namespace spore::graph

namespace spore {

namespace detail {
void set_graph_mode_available(bool (*fn)());  // core/context.cpp
}
namespace {
// set_context({.mode = Mode::Graph}) works once this file is linked in.
[[maybe_unused]] const bool g_graph_registered =
    (detail::set_graph_mode_available([] { return true; }), true);
}  // namespace

bool is_tracing() { return ops::trace_hook() != nullptr; }

JitFunction::JitFunction(Fn fn, JitOptions opts) : state_(std::make_shared<graph::JitState>()) {
  SPORE_CHECK(fn != nullptr, "[jit] the function is empty");
  state_->fn = std::move(fn);
  state_->opts = std::move(opts);
}

std::vector<Tensor> JitFunction::operator()(const std::vector<Tensor>& args) {
  graph::JitState& st = *state_;
  std::ostringstream key;
  for (const Tensor& a : args) {
    SPORE_CHECK(a.defined(), "[jit] ", st.opts.name, ": an argument is an undefined tensor");
    SPORE_CHECK(!a.is_symbolic(), "[jit] ", st.opts.name,
                " was called with a symbolic tensor; "
                "calling a jit function while tracing another is not supported");
    key << dtype_name(a.dtype()) << shape_str(a.shape()) << to_string(a.device()) << ";";
  }
  if (st.opts.extra_key) key << "|" << st.opts.extra_key();
  const std::string k = key.str();
  auto it = st.cache.find(k);
  std::shared_ptr<graph::Compiled> c;
  if (it != st.cache.end()) {
    c = it->second;
    ++st.stats.cache_hits;
  } else {
    c = graph::compile(st, args);
    ++st.stats.traces;
    st.cache[k] = c;
    st.order.push_back(k);
    while (st.cache.size() > std::max<size_t>(st.opts.max_cache, 1)) {
      st.cache.erase(st.order.front());
      st.order.pop_front();
    }
  }
  st.last = c;
  st.stats.cache_size = st.cache.size();
  st.stats.nodes_traced = c->nodes_traced;
  st.stats.nodes = c->exec->graph().num_nodes();
  st.stats.planned_peak_bytes = c->exec->plan().arena_bytes;
  st.stats.unplanned_bytes = c->exec->plan().total_bytes;
  return c->exec->run(args);
}

JitStats JitFunction::stats() const { return state_->stats; }
std::string JitFunction::graph_text() const {
  return state_->last ? graph::to_text(state_->last->exec->graph()) : "";
}

JitFunction jit(JitFunction::Fn fn, JitOptions opts) {
  return JitFunction(std::move(fn), std::move(opts));
}

}  // namespace spore
