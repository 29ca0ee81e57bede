// The registry self-test: walks ops.def and fails for any primitive that lacks inference, a
// gradient rule (unless kNonDiff or kInplace), a CPU kernel (views: a view rule; ops fused by
// call: row kernels too), or a test row.
#include <gtest/gtest.h>

#include <set>

#include "op_table.h"

namespace spore::test {

TEST(Registry, EveryPrimitiveIsComplete) {
  std::set<ops::OpId> tested;
  for (const OpCase& c : op_cases()) tested.insert(c.op);
  std::vector<std::string> problems;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const ops::OpDef& d = ops::op_def(ops::OpId(i));
    if (!d.rules.infer) problems.push_back(std::string(d.name) + ": no inference rule");
    if (!d.has(ops::kNonDiff) && !d.has(ops::kInplace) && !d.rules.vjp)
      problems.push_back(std::string(d.name) + ": no gradient rule (mark it kNonDiff if intended)");
    if (d.has(ops::kView) ? !d.rules.view : !ops::find_kernel(ops::OpId(i), DeviceType::CPU))
      problems.push_back(std::string(d.name) + (d.has(ops::kView) ? ": no view rule" : ": no CPU kernel"));
    if (!tested.count(ops::OpId(i))) problems.push_back(std::string(d.name) + ": no row in the op test table");
    // A trait that promises fusion by call needs the row kernels the fused program calls.
    const ops::KernelEntry* k = ops::find_kernel(ops::OpId(i), DeviceType::CPU);
    if (d.traits.fused == ops::fused::Opcode::kCall && !(k && k->rows.f32))
      problems.push_back(std::string(d.name) + ": fused = kCall but no float32 row kernel (SPORE_KERNEL_ROWS)");
  }
  std::string all;
  for (const auto& p : problems) all += "  " + p + "\n";
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems:\n" << all;
}

}  // namespace spore::test
