// ToDevice: the one op that moves data between devices (Tensor::to(Device)). It is an ordinary
// primitive, so autograd records it (the gradient goes back to the source device) and Graph mode
// traces it (a test can count a step's transfers). Its kernel is device-neutral: it asks the
// backends to copy (backends/backend.h, copy_bytes), so every backend has it without writing it.
#include "backends/backend.h"
#include "ops/op.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {
Device target_of(const Attrs& a) {
  return Device{DeviceType(a.get_int("device_type")), int(a.get_int("device_index"))};
}

void to_device_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  // A strided view is packed on its own device first, so only contiguous bytes cross.
  const Tensor src = x.is_contiguous() ? x : x.contiguous();
  // A copy to the host always completes before returning (the host reads it next); one to a
  // device may stay queued when asked (non_blocking) and the source is not freed before it runs.
  const bool blocking =
      y.device().type == DeviceType::CPU || !ctx.attrs.get_bool("non_blocking", false);
  copy_bytes(y.data_ptr(), y.device(), src.data_ptr(), src.device(), y.nbytes(), blocking);
}

template <DeviceType D>
bool register_everywhere() {
  detail::register_kernel(
      OpId::ToDevice, D, to_device_kernel,
      {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64});
  return true;
}
[[maybe_unused]] const bool registered =
    register_everywhere<DeviceType::CPU>() && register_everywhere<DeviceType::GPU>() &&
    register_everywhere<DeviceType::Ascend>() && register_everywhere<DeviceType::Test>();
}  // namespace

SPORE_DEFINE_OP(ToDevice,
                {
                    .infer = [](const Metas& in, const Attrs&) -> Metas { return {in[0]}; },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {c.g().to(c.in(0).device())};
                    },
                });

Device transfer_target(const Attrs& attrs) { return target_of(attrs); }

}  // namespace spore::ops

namespace spore {
Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  if (x.device() == device) return x;
  get_backend(device.type);  // names the supported targets when this one is absent
  return ops::call1(ops::OpId::ToDevice, {x},
                    ops::Attrs()
                        .set("device_type", int64_t(device.type))
                        .set("device_index", int64_t(device.index))
                        .set("non_blocking", non_blocking));
}
}  // namespace spore
