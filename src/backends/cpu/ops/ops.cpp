// Registers the CPU backend's private ops (ops.def in this folder) with the op table at their first
// use, all at once and in ops.def order, and hands out their ids.
#include <array>

#include "backends/cpu/ops/rules.h"

namespace spore::cpu::op {
namespace {
using namespace ::spore::ops;  // the flags in the ops.def rows
using F = fused::Opcode;
using A = AmpClass;

enum Index : int {
#define SPORE_CPU_OP(Name, ...) k##Name,
#include "backends/cpu/ops/ops.def"
#undef SPORE_CPU_OP
  kCount
};

const std::vector<OpId>& ids() {
  // A function-local static: registered on the first call, whichever static initialiser makes it.
  static const std::vector<OpId> ids = {
#define SPORE_CPU_OP(Name, str, nin, nout, flags, ...)                                  \
  register_op(str, nin, nout, uint32_t(flags) | kBackendPrivate, OpTraits{__VA_ARGS__}, \
              rules::Name()),
#include "backends/cpu/ops/ops.def"
#undef SPORE_CPU_OP
  };
  return ids;
}
}  // namespace

#define SPORE_CPU_OP(Name, ...) \
  OpId Name() { return ids()[k##Name]; }
#include "backends/cpu/ops/ops.def"
#undef SPORE_CPU_OP

const std::vector<OpId>& all() { return ids(); }

}  // namespace spore::cpu::op
