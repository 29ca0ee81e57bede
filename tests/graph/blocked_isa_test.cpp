// ISA-aware blocked layouts (backends/cpu/isa.h, ops/blocked.h): the layout pass blocks channels
// in the width of the ISA the CPU backend runs (16 on AVX-512, 8 on AVX2), and then no reorder runs
// between Spore's blocked tensors and oneDNN's convolutions. The graph is compiled under both
// widths; each runs and matches the plain graph, and the reorders of blocked arguments inside the
// oneDNN primitives are counted (oneDNN choosing its own layouts: SPORE_CONV_IMPL=onednn_blocked).
// ctest runs this file twice: on the machine's ISA, and with ONEDNN_MAX_CPU_ISA=AVX2
// (tests/CMakeLists.txt), so an AVX-512 machine checks the AVX2 layout too.
#include <gtest/gtest.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/onednn/onednn.h"
#include "backends/cpu/ops/ops.h"
#include "backends/cpu/passes/passes.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "ops/op.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::OpId;

namespace {

struct Compiled {
  std::vector<std::vector<float>> outputs;
  size_t reorders = 0;  // blocked-argument reorders in one steady-state run
  size_t blocked = 0;   // convs with a blocked side
  int64_t lanes = 0;
};

// A ResNet-style block with batch norm, relu, a max pool and a projection shortcut, forward and
// backward (the layers Graph mode blocks in training).
std::unique_ptr<Graph> traced_block(Tensor& x) {
  set_seed(7);
  x = randn({4, 16, 16, 16});
  auto param = [](Shape s, double k) { return (randn(s) * k).set_requires_grad(true); };
  static Tensor w1, w2, ws, g1, be1, probe;
  w1 = param({32, 16, 3, 3}, 0.1), w2 = param({32, 32, 3, 3}, 0.1), ws = param({32, 16, 1, 1}, 0.2);
  g1 = (randn({32}) * 0.1 + 1.0).set_requires_grad(true), be1 = param({32}, 0.1);
  probe = randn({4, 32});
  auto fn = [](const std::vector<Tensor>& a) {
    EnableGradGuard eg;
    Tensor h = ops::call(OpId::BatchNorm, {conv2d(a[0], w1, {.padding = {1, 1, 1, 1}}), g1, be1},
                         ops::Attrs().set("eps", 1e-5))[0];
    h = max_pool2d(relu(h), {.kernel_size = {2, 2}});
    h = relu(conv2d(h, w2, {.padding = {1, 1, 1, 1}}) + conv2d(a[0], ws, {.stride = {2, 2}}));
    Tensor loss = (h.mean({2, 3}) * probe).sum();
    auto gr = autograd::grad(loss, {w1, w2, ws, g1, be1});
    std::vector<Tensor> r{loss};
    r.insert(r.end(), gr.begin(), gr.end());
    return r;
  };
  return graph::trace(fn, {x});
}

Compiled compile_and_run(const Graph& traced, const Tensor& x, int64_t lanes) {
  const cpu::ScopedBlockedLanes scoped(lanes);
  auto g = traced.clone();
  cpu::fuse_conv_matmul(*g);
  graph::dead_code_elimination(*g);
  cpu::blocked_layout(*g);
  graph::dead_code_elimination(*g);
  graph::verify(*g);
  Compiled r;
  r.lanes = lanes;
  for (const auto& n : g->nodes) {
    if (n->attrs.get_bool("blocked_x", false) || n->attrs.get_bool("blocked_y", false)) {
      ++r.blocked;
      EXPECT_EQ(n->attrs.get_int("lanes"), lanes) << n->def().name;
    }
    for (const graph::Value* v : n->outputs)
      if (v->shape.size() == 5 && v->dtype == kFloat32) {
        EXPECT_EQ(v->shape[4], lanes) << "a blocked output of " << n->def().name;
      }
  }
  const cpu::ScopedConvImpl onednn_layouts("onednn_blocked");
  auto g2 = g->clone();
  test::run_graph_all(std::move(g2), {x});  // first run: primitives created (and timed)
  const size_t before = cpu::onednn::blocked_arg_reorders();
  r.outputs = test::run_graph_all(std::move(g), {x});
  r.reorders = cpu::onednn::blocked_arg_reorders() - before;
  return r;
}

}  // namespace

TEST(BlockedIsa, WidthFollowsTheIsaWithNoReorders) {
  const cpu::CpuIsa& isa = cpu::cpu_isa();
  std::cout << "CPU backend ISA: " << isa.str() << "\n";
  EXPECT_EQ(isa.lanes, isa.lanes_forced ? isa.lanes : (isa.avx512 ? 16 : 8));
  Tensor x;
  auto traced = traced_block(x);
  const auto ref = test::run_graph_all(traced->clone(), {x});
  for (int64_t lanes : {int64_t(8), int64_t(16)}) {
    SCOPED_TRACE("lanes " + std::to_string(lanes));
    const Compiled c = compile_and_run(*traced, x, lanes);
    EXPECT_GE(c.blocked, 5u) << "the convs (forward and backward) run blocked";
    ASSERT_EQ(c.outputs.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k)
      test::expect_close(c.outputs[k], ref[k], 2e-5, "output " + std::to_string(k));
    std::cout << "lanes " << lanes << ": " << c.blocked << " blocked convs, " << c.reorders
              << " reorders of blocked arguments in one run\n";
    const int64_t native = isa.avx512 ? 16 : 8;
    const bool vector_isa = isa.avx512 || isa.onednn.rfind("avx2", 0) == 0;
    if (lanes == native)
      EXPECT_EQ(c.reorders, 0u) << "oneDNN's kernels on " << isa.onednn << " want nChw" << lanes
                                << "c: Spore's blocked tensors must be theirs";
    else if (vector_isa)
      EXPECT_GT(c.reorders, 0u) << "the other width must make oneDNN reorder (else the count "
                                   "above proves nothing)";
  }
}

// blocked_lanes() follows the ISA unless a scope overrides it.
TEST(BlockedIsa, ScopedOverride) {
  const int64_t native = cpu::blocked_lanes();
  {
    const cpu::ScopedBlockedLanes s(native == 16 ? 8 : 16);
    EXPECT_EQ(cpu::blocked_lanes(), native == 16 ? 8 : 16);
  }
  EXPECT_EQ(cpu::blocked_lanes(), native);
  EXPECT_THROW(cpu::ScopedBlockedLanes(4), Error);
}

// The Highway kernels run the ISA's vectors too: the training Winograd, whose 16-channel register
// groups may not span two 8-lane blocks, takes a 3x3 conv on the native width. Under
// ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine, Highway 1.0.3 kept dispatching AVX3 code after
// its targets were disabled, so the 8-lane graphs' convs all fell back to oneDNN (isa.cpp pins it).
TEST(BlockedIsa, HighwayKernelsRunTheIsasVectors) {
  const cpu::CpuIsa& isa = cpu::cpu_isa();
  if (!isa.avx512 && isa.onednn.rfind("avx2", 0) != 0)
    GTEST_SKIP() << "oneDNN runs " << isa.onednn << ": no vector ISA to check";
  cpu::ConvDesc d;
  d.N = 32, d.C = d.O = 64, d.H = d.W = d.OH = d.OW = 32, d.kh = d.kw = 3;
  d.pt = d.pb = d.pl = d.pr = 1;
  d.blocked_x = d.blocked_y = true;
  d.lanes = isa.avx512 ? 16 : 8;
  for (cpu::ConvProp p : {cpu::ConvProp::kForward, cpu::ConvProp::kBackwardData}) {
    d.prop = p;
    const cpu::ConvChoice c = cpu::choose_conv(d);
    EXPECT_STREQ(c.name(), "winograd") << d.str() << " on " << isa.str() << ": " << c.str();
  }
}
