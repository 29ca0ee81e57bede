// spore._C: the functional ops (spore/ops.h), autograd (grad, grad-mode scopes, stop_gradient)
// and jit (Graph mode for Python functions). MindSpore's argument names and defaults are adapted
// in Python (spore/ops/functional.py); here each op is bound once under its C++ name, with no
// defaults: the public defaults have one home, spore/ops/surface.py
// (tests/python/test_op_surface.py).
#include "common.h"

namespace spore::python {
namespace {

Axes axes_of(py::object a) { return a.is_none() ? Axes{} : to_ints(a); }

// A grad-mode scope usable as a Python context manager.
template <typename Guard>
struct Scope {
  std::unique_ptr<Guard> g;
  void enter() { g = std::make_unique<Guard>(); }
  void exit(py::args) { g.reset(); }
};

// Runs a cell's amp policy around a Python construct (C++ cells do it in operator()).
struct PolicyScopeHolder {
  std::optional<amp::Policy> p;
  std::unique_ptr<amp::PolicyScope> s;
  void enter() {
    if (p) s = std::make_unique<amp::PolicyScope>(*p);
  }
  void exit(py::args) { s.reset(); }
};

}  // namespace

void bind_ops(py::module_& m) {
  using T = const Tensor&;
  // ---- elementwise (unary) ----
  m.def("neg", [](T x) { return neg(x); });
  m.def("abs", [](T x) { return abs(x); });
  m.def("exp", [](T x) { return exp(x); });
  m.def("log", [](T x) { return log(x); });
  m.def("sqrt", [](T x) { return sqrt(x); });
  m.def("rsqrt", [](T x) { return rsqrt(x); });
  m.def("sin", [](T x) { return sin(x); });
  m.def("cos", [](T x) { return cos(x); });
  m.def("tanh", [](T x) { return tanh(x); });
  m.def("sigmoid", [](T x) { return sigmoid(x); });
  m.def("relu", [](T x) { return relu(x); });
  m.def("relu6", [](T x) { return relu6(x); });
  m.def("leaky_relu", [](T x, double a) { return leaky_relu(x, a); });
  m.def("silu", [](T x) { return silu(x); });
  m.def("gelu", [](T x, bool approx) { return gelu(x, approx); });
  m.def("softplus", [](T x, double b, double t) { return softplus(x, b, t); });
  m.def("clamp",
        [](T x, std::optional<double> lo, std::optional<double> hi) { return clamp(x, lo, hi); });
  m.def("floor", [](T x) { return floor(x); });
  m.def("ceil", [](T x) { return ceil(x); });
  m.def("round", [](T x) { return round(x); });
  m.def("sign", [](T x) { return sign(x); });
  m.def("erf", [](T x) { return erf(x); });
  m.def("square", [](T x) { return square(x); });
  m.def("reciprocal", [](T x) { return reciprocal(x); });
  m.def("cast", [](T x, py::object d) { return cast(x, to_dtype(d)); });
  m.def("logical_not", [](T x) { return logical_not(x); });
  // ---- elementwise (binary); Python scalars take the tensor operand's dtype ----
  auto bin = [&m](const char* name, Tensor (*fn)(const Tensor&, const Tensor&)) {
    m.def(name, [fn](T a, T b) { return fn(a, b); });
    m.def(name, [fn](T a, py::object b) { return fn(a, scalar_or_tensor(b, a)); });
    m.def(name, [fn](py::object a, T b) { return fn(scalar_or_tensor(a, b), b); });
  };
  bin("add", [](T a, T b) { return add(a, b); });
  bin("sub", [](T a, T b) { return sub(a, b); });
  bin("mul", [](T a, T b) { return mul(a, b); });
  bin("div", [](T a, T b) { return div(a, b); });
  bin("pow", [](T a, T b) { return pow(a, b); });
  bin("maximum", [](T a, T b) { return maximum(a, b); });
  bin("minimum", [](T a, T b) { return minimum(a, b); });
  bin("equal", [](T a, T b) { return equal(a, b); });
  bin("not_equal", [](T a, T b) { return not_equal(a, b); });
  bin("less", [](T a, T b) { return less(a, b); });
  bin("less_equal", [](T a, T b) { return less_equal(a, b); });
  bin("greater", [](T a, T b) { return greater(a, b); });
  bin("greater_equal", [](T a, T b) { return greater_equal(a, b); });
  bin("logical_and", [](T a, T b) { return logical_and(a, b); });
  bin("logical_or", [](T a, T b) { return logical_or(a, b); });
  bin("logical_xor", [](T a, T b) { return logical_xor(a, b); });
  m.def("where", [](T c, py::object x, py::object y) {
    Tensor tx = py::isinstance<Tensor>(x) ? x.cast<Tensor>() : Tensor();
    Tensor ty = py::isinstance<Tensor>(y) ? y.cast<Tensor>() : Tensor();
    if (!tx.defined()) tx = ty.defined() ? scalar_or_tensor(x, ty) : to_tensor(x);
    if (!ty.defined()) ty = scalar_or_tensor(y, tx);
    return where(c, tx, ty);
  });

  // ---- reductions ----
  auto red = [&m](const char* name, Tensor (*fn)(const Tensor&, Axes, bool)) {
    m.def(name, [fn](T x, py::object axis, bool keep) { return fn(x, axes_of(axis), keep); });
  };
  red("sum", [](T x, Axes a, bool k) { return sum(x, a, k); });
  red("mean", [](T x, Axes a, bool k) { return mean(x, a, k); });
  red("amax", [](T x, Axes a, bool k) { return amax(x, a, k); });
  red("amin", [](T x, Axes a, bool k) { return amin(x, a, k); });
  red("prod", [](T x, Axes a, bool k) { return prod(x, a, k); });
  m.def("logsumexp", [](T x, py::object a, bool k) { return logsumexp(x, axes_of(a), k); });
  m.def("argmax", [](T x, int64_t a, bool k) { return argmax(x, a, k); });
  m.def("argmin", [](T x, int64_t a, bool k) { return argmin(x, a, k); });
  m.def("var", [](T x, py::object a, int64_t ddof, bool k) { return var(x, axes_of(a), ddof, k); });
  m.def("std",
        [](T x, py::object a, int64_t ddof, bool k) { return spore::std(x, axes_of(a), ddof, k); });
  m.def("sum_to_shape", [](T x, py::object s) { return sum_to_shape(x, to_shape(s)); });

  // ---- linear algebra, conv, pooling, normalisation (heavy: the GIL is released) ----
  auto nogil = py::call_guard<py::gil_scoped_release>();
  m.def(
      "matmul", [](T a, T b) { return matmul(a, b); }, nogil);
  m.def(
      "conv2d",
      [](T x, T w, std::optional<Tensor> b, std::vector<int64_t> stride, std::vector<int64_t> pad,
         std::vector<int64_t> dil, int64_t groups) {
        Conv2dOptions o{stride, pad, dil, groups};
        return b ? conv2d(x, w, *b, o) : conv2d(x, w, o);
      },
      nogil);
  auto pool_opts = [](std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                      bool ceil_mode, bool include_pad) {
    return Pool2dOptions{k, s, p, ceil_mode, include_pad};
  };
  m.def(
      "max_pool2d",
      [pool_opts](T x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                  bool c) { return max_pool2d(x, pool_opts(k, s, p, c, true)); },
      nogil);
  m.def(
      "avg_pool2d",
      [pool_opts](T x, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                  bool c, bool inc) { return avg_pool2d(x, pool_opts(k, s, p, c, inc)); },
      nogil);
  m.def(
      "adaptive_avg_pool2d", [](T x, std::vector<int64_t> s) { return adaptive_avg_pool2d(x, s); },
      nogil);
  m.def("batch_norm_train", [](T x, T g, T b, double eps) {
    auto [y, mean, var] = batch_norm_train(x, g, b, eps);
    return py::make_tuple(y, mean, var);
  });
  m.def(
      "batch_norm_infer",
      [](T x, T g, T b, T mean, T var, double eps) {
        return batch_norm_infer(x, g, b, mean, var, eps);
      },
      nogil);
  m.def(
      "layer_norm",
      [](T x, T g, T b, int64_t nd, double eps) { return layer_norm(x, g, b, nd, eps); }, nogil);

  // ---- softmax, shape and index ops ----
  m.def("softmax", [](T x, int64_t a) { return softmax(x, a); });
  m.def("log_softmax", [](T x, int64_t a) { return log_softmax(x, a); });
  m.def("concat", [](std::vector<Tensor> xs, int64_t a) { return concat(xs, a); });
  m.def("stack", [](std::vector<Tensor> xs, int64_t a) { return stack(xs, a); });
  m.def("split", [](T x, std::vector<int64_t> s, int64_t a) { return split(x, s, a); });
  m.def("chunk", [](T x, int64_t n, int64_t a) { return chunk(x, n, a); });
  m.def("gather", [](T x, int64_t a, T i) { return gather(x, a, i); });
  m.def("index_select", [](T x, int64_t a, T i) { return index_select(x, a, i); });
  m.def("scatter_add", [](T x, int64_t a, T i, T s) { return scatter_add(x, a, i, s); });
  m.def("pad", [](T x, std::vector<int64_t> p, double v) { return pad(x, p, v); });
  m.def("one_hot", [](T i, int64_t d, py::object dt) { return one_hot(i, d, to_dtype(dt)); });
  m.def("dropout", [](T x, double p, bool training) { return dropout(x, p, training); });
  m.def("upsample_nearest2d", [](T x, std::vector<int64_t> s) { return upsample_nearest2d(x, s); });
  m.def("topk", [](T x, int64_t k, int64_t a, bool largest, bool sorted) {
    auto [v, i] = topk(x, k, a, largest, sorted);
    return py::make_tuple(v, i);
  });
  m.def("sort", [](T x, int64_t a, bool desc) {
    auto [v, i] = sort(x, a, desc);
    return py::make_tuple(v, i);
  });
  m.def("argsort", [](T x, int64_t a, bool desc) { return argsort(x, a, desc); });
  m.def("cumsum", [](T x, int64_t a) { return cumsum(x, a); });
  m.def("assign", [](T dst, py::object src) {
    NoGradGuard g;
    assign(dst, scalar_or_tensor(src, dst));
  });

  // ---- autograd ----
  m.def("stop_gradient", &stop_gradient);
  m.def(
      "grad",
      [](T out, std::vector<Tensor> inputs, std::optional<Tensor> sens, bool create_graph) {
        return autograd::grad(out, inputs,
                              {.sens = sens.value_or(Tensor()), .create_graph = create_graph});
      },
      py::arg("output"), py::arg("inputs"), py::arg("sens") = py::none(),
      py::arg("create_graph") = false, nogil);
  py::class_<Scope<NoGradGuard>>(m, "_NoGrad")
      .def(py::init<>())
      .def("__enter__", &Scope<NoGradGuard>::enter)
      .def("__exit__", &Scope<NoGradGuard>::exit);
  py::class_<Scope<EnableGradGuard>>(m, "_EnableGrad")
      .def(py::init<>())
      .def("__enter__", &Scope<EnableGradGuard>::enter)
      .def("__exit__", &Scope<EnableGradGuard>::exit);
  py::class_<PolicyScopeHolder>(m, "_PolicyScope")
      .def(py::init([](const nn::Cell& c) {
        return PolicyScopeHolder{c.amp_policy(), nullptr};
      }))
      .def("__enter__", &PolicyScopeHolder::enter)
      .def("__exit__", &PolicyScopeHolder::exit);

  // ---- jit: fn(list of tensors) -> list of tensors, traced on each new signature ----
  py::class_<JitStats>(m, "JitStats")
      .def_readonly("traces", &JitStats::traces)
      .def_readonly("cache_hits", &JitStats::cache_hits)
      .def_readonly("cache_size", &JitStats::cache_size)
      .def_readonly("nodes_traced", &JitStats::nodes_traced)
      .def_readonly("nodes", &JitStats::nodes)
      .def_readonly("planned_peak_bytes", &JitStats::planned_peak_bytes);
  py::class_<JitFunction>(m, "JitFunction")
      .def(py::init([](py::function fn, std::string name, py::object extra_key, size_t max_cache) {
             PyRef f(fn);
             JitOptions o{.name = std::move(name), .extra_key = {}, .max_cache = max_cache};
             if (!extra_key.is_none()) {
               PyRef k(extra_key);
               o.extra_key = [k] {
                 py::gil_scoped_acquire gil;
                 return k.get()().cast<std::string>();
               };
             }
             return JitFunction(
                 [f](const std::vector<Tensor>& args) {
                   py::gil_scoped_acquire gil;
                   return f.get()(py::cast(args)).cast<std::vector<Tensor>>();
                 },
                 std::move(o));
           }),
           py::arg("fn"), py::arg("name") = "jit", py::arg("extra_key") = py::none(),
           py::arg("max_cache") = 8)
      .def(
          "__call__", [](JitFunction& f, const std::vector<Tensor>& args) { return f(args); },
          nogil)
      .def("stats", &JitFunction::stats)
      .def("graph_text", &JitFunction::graph_text);
}

}  // namespace spore::python
