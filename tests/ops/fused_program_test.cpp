// Every FusedElementwise opcode against the primitive it stands for. For each op whose ops.def
// trait names an opcode (and each variant lowering() can select, e.g. gelu's tanh form), a
// one-instruction program (plus a bool -> float step for comparisons) must equal the unfused op
// on the same inputs, in float32 and float64, with the parameters read from the op's attributes
// by the names fused::lowering() gives. So the program format's one owner (ops/fused_program.h),
// the traits and the CPU interpreter can never drift apart.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ops/fused_program.h"
#include "ops/op.h"
#include "spore/spore.h"

namespace spore {
namespace {
using ops::OpId;
using ops::fused::Opcode;
namespace fz = ops::fused;

// Inputs for op `def` in dtype t: positive where the op needs a domain (log, sqrt, pow's base),
// bool where it wants conditions.
ops::Tensors make_inputs(const ops::OpDef& def, Opcode op, DType t) {
  const std::string name = def.name;
  const bool logical = name.rfind("logical_", 0) == 0;
  const int nin = def.num_inputs;
  ops::Tensors in;
  for (int i = 0; i < nin; ++i) {
    if (op == Opcode::kBoolToFloat || logical || (op == Opcode::kWhere && i == 0)) {
      in.push_back(greater(randn({3, 7}, t), full({}, 0.0, t)));
      continue;
    }
    Tensor x = randn({3, 7}, t) * 2.0;
    if (name == "log" || name == "sqrt" || name == "rsqrt" || (name == "pow" && i == 0))
      x = abs(x) + 0.25;
    in.push_back(x);
  }
  return in;
}

// Attribute values for an opcode's parameters (by the names lowering() reads).
ops::Attrs make_attrs(Opcode op, bool variant) {
  const fz::Lowering lw = fz::lowering(op);
  ops::Attrs a;
  if (lw.param0) a.set(lw.param0, op == Opcode::kClamp ? -0.3 : 0.2);
  if (lw.param1) a.set(lw.param1, op == Opcode::kClamp ? 0.4 : 5.0);
  if (lw.variant_attr) a.set(lw.variant_attr, variant);
  if (op == Opcode::kBoolToFloat) a.set("dtype", kFloat32);
  return a;
}

TEST(FusedProgram, EveryOpcodeEqualsItsPrimitive) {
  std::set<Opcode> covered;
  for (int id = 0; id < ops::kNumOps; ++id) {
    const ops::OpDef& def = ops::op_def(OpId(id));
    const Opcode base = def.traits.fused;
    if (base == Opcode::kNone) continue;
    const fz::Lowering lw = fz::lowering(base);
    for (const bool variant : {false, true}) {
      if (variant && !lw.variant_attr) continue;
      const Opcode op = variant ? lw.variant : base;
      for (const DType t : {kFloat32, kFloat64}) {
        SCOPED_TRACE(std::string(def.name) + (variant ? " (variant)" : "") + " " + dtype_name(t));
        set_seed(11 + id);
        const ops::Tensors in = make_inputs(def, base, t);
        ops::Attrs attrs = make_attrs(base, variant);
        if (base == Opcode::kBoolToFloat) attrs.set("dtype", t);
        Tensor want = ops::call(OpId(id), in, attrs)[0];
        // The program: one instruction over the inputs, parameters as constants.
        std::vector<int64_t> prog{int64_t(op), -1, -1, -1}, consts;
        const int nin = int(in.size());
        if (fz::is_unary(op)) {
          prog[1] = 0;
          if (lw.param0)
            prog[2] = int64_t(consts.size()),
            consts.push_back(fz::encode_double(attrs.get_float(lw.param0)));
          if (lw.param1)
            prog[3] = int64_t(consts.size()),
            consts.push_back(fz::encode_double(attrs.get_float(lw.param1)));
        } else {
          for (int i = 0; i < nin; ++i) prog[size_t(1 + i)] = i;
        }
        if (fz::is_bool_result(op)) {  // a bool result must become the float output
          prog.insert(prog.end(), {int64_t(Opcode::kBoolToFloat), nin, -1, -1});
          want = want.to(t);
        }
        const Tensor got = ops::call(OpId::FusedElementwise, in,
                                     ops::Attrs()
                                         .set("program", prog)
                                         .set("consts", consts)
                                         .set("shape", Shape{3, 7})
                                         .set("dtype", t))[0];
        ASSERT_EQ(got.dtype(), want.dtype());
        const auto g = got.to_vector<double>(), w = want.to_vector<double>();
        for (size_t i = 0; i < g.size(); ++i)
          EXPECT_NEAR(g[i], w[i], (t == kFloat32 ? 2e-6 : 1e-14) * std::max(1.0, std::abs(w[i])))
              << "element " << i;
        covered.insert(op);
      }
    }
  }
  // Every native opcode is reached from some op's trait (kConst and kCall have their own tests:
  // tests/ops/fused_cases.cpp and tests/custom_op).
  for (int64_t c = int64_t(Opcode::kNeg); c <= int64_t(Opcode::kLastUnary); ++c)
    EXPECT_TRUE(covered.count(Opcode(c))) << "unary opcode " << c << " has no op in ops.def";
  for (int64_t c = int64_t(Opcode::kAdd); c <= int64_t(Opcode::kLastBinary); ++c)
    EXPECT_TRUE(covered.count(Opcode(c))) << "binary opcode " << c << " has no op in ops.def";
  EXPECT_TRUE(covered.count(Opcode::kWhere));
}

}  // namespace
}  // namespace spore
