// The CPU backend's private primitives (backends/cpu/ops/ops.def) by name: cpu::op::Conv2dFused()
// is that op's id. The ids are run-time ones (ops::register_op): the first call of any of these
// functions registers all of them with their rules, so using one from a static initialiser (a
// kernel's registration) is safe. This header is part of the op interface kernels see (core
// layer, as src/ops/op.h); the registration and the rules are in this folder's .cpp files.
#pragma once
#include <vector>

#include "ops/op.h"

namespace spore::cpu::op {

#define SPORE_CPU_OP(Name, ...) ::spore::ops::OpId Name();
#include "backends/cpu/ops/ops.def"
#undef SPORE_CPU_OP

// Every CPU-private op, in ops.def order (the registry test walks them).
const std::vector<ops::OpId>& all();

}  // namespace spore::cpu::op

// SPORE_CPU_KERNEL(Conv2dFused, conv2d_fused_kernel, kFloat32, ...): SPORE_KERNEL for a CPU-private
// op.
#define SPORE_CPU_KERNEL(Name, fn, ...)                                                         \
  [[maybe_unused]] static const bool spore_kernel_CPU_##Name =                                  \
      ::spore::ops::detail::register_kernel(::spore::cpu::op::Name(), ::spore::DeviceType::CPU, \
                                            fn, {__VA_ARGS__})
