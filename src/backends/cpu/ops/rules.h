// The rules (inference; all CPU-private ops are kNonDiff) of the CPU backend's private ops, one
// function per ops.def row, defined in this folder's family files; ops.cpp registers each op with
// its rules on first use of cpu::op::Name().
#pragma once
#include "backends/cpu/ops/ops.h"

namespace spore::cpu::rules {

#define SPORE_CPU_OP(Name, ...) ::spore::ops::OpRules Name();
#include "backends/cpu/ops/ops.def"
#undef SPORE_CPU_OP

}  // namespace spore::cpu::rules
