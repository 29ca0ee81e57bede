// The registry self-test: walks ops.def and the CPU backend's private ops
// (backends/cpu/ops/ops.def) and fails for any primitive that lacks inference, a gradient rule
// (unless kNonDiff or kInplace), a CPU kernel (views: a view rule; ops fused by call: row kernels
// too), or a test row.
#include <gtest/gtest.h>

#include <set>

#include "backends/cpu/ops/ops.h"
#include "op_table.h"

namespace spore::test {

TEST(Registry, EveryPrimitiveIsComplete) {
  std::set<ops::OpId> tested;
  for (const OpCase& c : op_cases()) tested.insert(c.op);
  std::vector<std::string> problems;
  std::vector<ops::OpId> ids;
  for (int i = 0; i < ops::kNumOps; ++i) ids.push_back(ops::OpId(i));
  for (ops::OpId id : cpu::op::all()) ids.push_back(id);
  for (const ops::OpId id : ids) {
    const ops::OpDef& d = ops::op_def(id);
    if (!d.rules.infer) problems.push_back(std::string(d.name) + ": no inference rule");
    if (!d.has(ops::kNonDiff) && !d.has(ops::kInplace) && !d.rules.vjp)
      problems.push_back(std::string(d.name) + ": no gradient rule (mark it kNonDiff if intended)");
    if (d.has(ops::kView) ? !d.rules.view : !ops::find_kernel(id, DeviceType::CPU))
      problems.push_back(std::string(d.name) +
                         (d.has(ops::kView) ? ": no view rule" : ": no CPU kernel"));
    if (!tested.count(id))
      problems.push_back(std::string(d.name) + ": no row in the op test table");
    // A trait that promises fusion by call needs the row kernels the fused program calls.
    const ops::KernelEntry* k = ops::find_kernel(id, DeviceType::CPU);
    if (d.traits.fused == ops::fused::Opcode::kCall && !(k && k->rows.f32))
      problems.push_back(std::string(d.name) +
                         ": fused = kCall but no float32 row kernel (SPORE_KERNEL_ROWS)");
  }
  std::string all;
  for (const auto& p : problems) all += "  " + p + "\n";
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems:\n" << all;
}

// The CPU's private ops are registered by the CPU backend at load time, with run-time ids after
// the built-in primitives, and are found by name like custom ops.
TEST(Registry, CpuPrivateOpsAreRegisteredByTheBackend) {
  ASSERT_EQ(cpu::op::all().size(), 10u);
  for (ops::OpId id : cpu::op::all()) {
    EXPECT_GE(int(id), ops::kNumOps) << ops::op_name(id);
    const ops::OpDef* d = ops::find_op(ops::op_name(id));
    ASSERT_NE(d, nullptr) << ops::op_name(id);
    EXPECT_EQ(d->id, id);
  }
  EXPECT_EQ(ops::find_op("conv2d_fused")->id, cpu::op::Conv2dFused());
  EXPECT_EQ(ops::find_op("to_blocked")->id, cpu::op::ToBlocked());
}

}  // namespace spore::test
