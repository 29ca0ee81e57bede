// Custom ops (spore/custom_op.h): a test-only pointwise op registered here, and the example's swish
// (examples/custom_op/). Each runs in PyNative against a reference formula, passes a float64
// finite-difference gradient check, is fused by Graph mode's elementwise fusion (through its row
// kernels: fused::Opcode::kCall) with results equal to PyNative, and is cast by amp from its trait.
// An AOT kernel (MindSpore's entry point in a library built on its own, tests/custom_op/aot/)
// loaded with load_aot_kernel equals the built-in add in both modes, and its errors are clear.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../../examples/custom_op/swish_op.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "ops/op.h"
#include "spore/spore.h"

using namespace spore;

namespace {
// softsign(x) = x / (1 + |x|): the test-only op, fusible and on amp's O1 white list.
template <class T>
void softsign_row(const T* x, int64_t sx, const T*, int64_t, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i * sx] / (T(1) + std::abs(x[i * sx]));
}
const CustomOpHandle& softsign() {
  static const CustomOpHandle op = register_custom_op({
      .name = "test_softsign",
      .num_inputs = 1,
      .bprop =
          [](const std::vector<Tensor>& in, const Tensor&, const Tensor& dy) {
            const Tensor d = 1.0 + abs(in[0]);
            return std::vector<Tensor>{dy / (d * d)};
          },
      .cpu_row_f32 = softsign_row<float>,
      .cpu_row_f64 = softsign_row<double>,
      .traits = {.pointwise = true, .zero_preserving = true, .amp = CustomOpTraits::Amp::kAllow16},
  });
  return op;
}

double softsign_ref(double x) { return x / (1 + std::abs(x)); }
double swish_ref(double x) { return x / (1 + std::exp(-x)); }

// Central differences of sum(op(x) * w) against autograd, in float64.
void gradient_check(const CustomOpHandle& op) {
  set_seed(7);
  Tensor x = randn({3, 5}, kFloat64), w = randn({3, 5}, kFloat64);
  auto [loss, grads] = value_and_grad([&](const Tensor& v) { return (op(v) * w).sum(); }, {x})(x);
  const auto g = grads[0].to_vector<double>();
  auto xv = x.to_vector<double>();
  const double eps = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    auto at = [&](double d) {
      auto v = xv;
      v[i] += d;
      return (op(from_vector(v, {3, 5})) * w).sum().item<double>();
    };
    const double fd = (at(eps) - at(-eps)) / (2 * eps);
    EXPECT_NEAR(g[i], fd, 1e-7 * std::max(1.0, std::abs(fd))) << op.name() << " element " << i;
  }
}

// y = relu(op(x) * 2 + 1): jit-compiled, it becomes one fused elementwise node.
void fused_in_graph_mode(const CustomOpHandle& op) {
  auto fn = [&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{relu(op(a[0]) * 2.0 + 1.0)};
  };
  set_seed(3);
  Tensor x = randn({4, 33});
  auto g = graph::trace(fn, {x});
  graph::run_pipeline(*g);
  EXPECT_EQ(g->count(ops::OpId::FusedElementwise), 1u) << op.name();
  EXPECT_EQ(g->num_nodes(), 1u) << op.name() << ": the op, mul, add and relu are one program";
  auto f = jit(fn);
  const auto got = f({x})[0].to_vector<float>(), want = fn({x})[0].to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_FLOAT_EQ(got[i], want[i]) << op.name() << " element " << i;
  EXPECT_NE(f.graph_text().find("fused_elementwise"), std::string::npos) << f.graph_text();
}

// Under amp O1 an allow-16 op computes in bfloat16 and hands float32 back: PyNative autocast, and
// Graph mode's cast pass puts the same casts around it.
void amp_cast(const CustomOpHandle& op, double (*ref)(double)) {
  set_seed(5);
  Tensor x = randn({64});
  Tensor y;
  {
    const amp::PolicyScope o1({amp::Level::O1, kBFloat16});
    y = op(x);
  }
  ASSERT_EQ(y.dtype(), kFloat32);
  const auto xv = x.to(kBFloat16).to(kFloat32).to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    const float want = full({1}, ref(xv[i]), kBFloat16).to(kFloat32).item<float>();
    EXPECT_NEAR(yv[i], want, std::abs(want) * 1e-2 + 1e-6) << op.name() << " element " << i;
  }
  auto fn = [&](const std::vector<Tensor>& a) {
    const amp::PolicyScope o1({amp::Level::O1, kBFloat16});
    return std::vector<Tensor>{op(a[0])};
  };
  auto g = graph::trace(fn, {x});
  EXPECT_EQ(graph::insert_amp_casts(*g), 2u) << op.name() << ": one cast in, one back to float32";
  bool low = false;
  for (const auto& n : g->nodes)
    if (std::string(n->def().name) == op.name()) low = n->inputs[0]->dtype == kBFloat16;
  EXPECT_TRUE(low) << op.name() << " runs in bfloat16 in the graph";
}
}  // namespace

TEST(CustomOp, TestOnlyOpMatchesReference) {
  Tensor x = from_vector<float>({-3, -0.5, 0, 0.25, 4}, {5});
  const auto y = softsign()(x).to_vector<float>();
  const auto xv = x.to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(y[i], float(softsign_ref(xv[i])));
  // Broadcasting, non-contiguous input, float64.
  Tensor t = randn({6, 4}, kFloat64).transpose(0, 1);
  const auto tv = t.contiguous().to_vector<double>(), ty = softsign()(t).to_vector<double>();
  for (size_t i = 0; i < ty.size(); ++i) EXPECT_DOUBLE_EQ(ty[i], softsign_ref(tv[i]));
}
TEST(CustomOp, TestOnlyOpGradientCheck) { gradient_check(softsign()); }
TEST(CustomOp, TestOnlyOpFusedInGraphMode) { fused_in_graph_mode(softsign()); }
TEST(CustomOp, TestOnlyOpAmpCast) { amp_cast(softsign(), softsign_ref); }

TEST(CustomOp, ExampleSwishMatchesReference) {
  Tensor x = randn({7, 3});
  const auto xv = x.to_vector<float>(), y = example::swish()(x).to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], swish_ref(xv[i]), 1e-6);
}
TEST(CustomOp, ExampleSwishGradientCheck) { gradient_check(example::swish()); }
TEST(CustomOp, ExampleSwishFusedInGraphMode) { fused_in_graph_mode(example::swish()); }
TEST(CustomOp, ExampleSwishAmpCast) { amp_cast(example::swish(), swish_ref); }

TEST(CustomOp, ClearErrors) {
  softsign();
  try {  // the name is taken
    register_custom_op({.name = "test_softsign", .cpu_row_f32 = softsign_row<float>});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  try {  // no kernel
    register_custom_op({.name = "test_no_kernel"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no CPU kernel"), std::string::npos) << e.what();
  }
  try {  // an unsupported dtype, named with the op
    softsign()(full({2}, 1.0, kInt32));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[test_softsign]"), std::string::npos) << e.what();
  }
  try {  // an empty handle
    CustomOpHandle()(randn({2}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("register_custom_op"), std::string::npos) << e.what();
  }
}

namespace {
const CustomOpHandle& aot_add() {
  static const CustomOpHandle op = register_custom_op({
      .name = "test_aot_add",
      .num_inputs = 2,
      .bprop =
          [](const std::vector<Tensor>&, const Tensor&, const Tensor& dy) {
            return std::vector<Tensor>{dy, dy};
          },
      .cpu_kernel =
          aot_cpu_kernel(load_aot_kernel(SPORE_TEST_AOT_LIBRARY, "CustomAdd"), "CustomAdd"),
      .dtypes = {kFloat32, kFloat64, kInt32, kInt64},
  });
  return op;
}
}  // namespace

TEST(CustomOp, AotKernelEqualsBuiltInAdd) {
  set_seed(9);
  for (DType t : {kFloat32, kFloat64}) {
    const Tensor a = randn({3, 5}, t), b = randn({3, 5}, t).transpose(0, 1).contiguous().t();
    const Tensor got = aot_add()(a, b), want = add(a, b);
    ASSERT_EQ(got.dtype(), t);
    EXPECT_EQ(got.to(kFloat64).to_vector<double>(), want.to(kFloat64).to_vector<double>());
  }
  const Tensor i = from_vector<int32_t>({1, 2, 3}, {3});
  EXPECT_EQ(aot_add()(i, i).to_vector<int32_t>(), (std::vector<int32_t>{2, 4, 6}));
  // Graph mode: a node of the compiled graph, the gradient through its bprop.
  const Tensor x = randn({4, 3}), y = randn({4, 3});
  auto fn = [&](const std::vector<Tensor>& v) {
    EnableGradGuard eg;
    const Tensor p = v[0].detach().set_requires_grad(true);
    const Tensor loss = (aot_add()(p, v[1]) * v[1]).sum();
    return std::vector<Tensor>{aot_add()(v[0], v[1]), autograd::grad(loss, {p})[0]};
  };
  auto f = jit(fn);
  const std::vector<Tensor> g = f({x, y});
  EXPECT_EQ(g[0].to_vector<float>(), add(x, y).to_vector<float>());
  EXPECT_EQ(g[1].to_vector<float>(), y.to_vector<float>());
  EXPECT_NE(f.graph_text().find("test_aot_add"), std::string::npos) << f.graph_text();
}

TEST(CustomOp, AotErrorsNameTheLibraryAndSymbol) {
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  std::string m = message([] { load_aot_kernel(SPORE_TEST_AOT_LIBRARY, "CustomSub"); });
  EXPECT_NE(m.find("has no function 'CustomSub'"), std::string::npos) << m;
  EXPECT_NE(m.find("extern \"C\""), std::string::npos) << m;
  m = message([] { load_aot_kernel("/nonexistent/libnothing.so", "CustomAdd"); });
  EXPECT_NE(m.find("cannot load the AOT library '/nonexistent/libnothing.so'"), std::string::npos)
      << m;
  // The kernel's nonzero return (1: a dtype it does not handle) names the kernel and the code.
  const Tensor l = from_vector<int64_t>({1, 2}, {2});
  m = message([&] { aot_add()(l, l); });
  EXPECT_NE(m.find("the AOT kernel 'CustomAdd' returned 1"), std::string::npos) << m;
}
