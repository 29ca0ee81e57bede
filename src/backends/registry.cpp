// Backend registry: backends register themselves at load time; lookups of a backend this build
// lacks give MindSpore's clarity (which targets exist, and what would make this one available).
#include <array>

#include "backends/backend.h"
#include "spore/error.h"

namespace spore {
namespace {
struct Slot {
  BackendFactory factory = nullptr;
  std::unique_ptr<Backend> instance;
};
std::array<Slot, kNumDeviceTypes>& slots() {
  static std::array<Slot, kNumDeviceTypes> s;
  return s;
}
std::string supported_list() {
  std::string s = "[";
  for (const auto& name : available_device_targets()) s += (s.size() > 1 ? ", '" : "'") + name + "'";
  return s + "]";
}
const char* how_to_enable(DeviceType t) {
  switch (t) {
    case DeviceType::GPU:
      return "To use 'GPU', rebuild Spore with the CUDA toolkit installed (cmake -DSPORE_CUDA=ON) "
             "on a machine with an NVIDIA GPU and driver, then check `nvidia-smi`.";
    case DeviceType::Ascend:
      return "The 'Ascend' target needs a vendor NPU backend (src/backends/ascend) built against "
             "CANN; this build has none. Use set_device(\"CPU\") meanwhile.";
    default: return "";
  }
}
}  // namespace

bool Backend::supports(ops::OpId op, DType dtype) const {
  const ops::KernelEntry* k = ops::find_kernel(op, type());
  return k && k->supports(dtype);
}

namespace detail {
bool register_backend(DeviceType type, BackendFactory factory) {
  slots()[size_t(type)].factory = factory;
  return true;
}
}  // namespace detail

bool has_backend(DeviceType type) { return slots()[size_t(type)].factory != nullptr; }

Backend& get_backend(DeviceType type) {
  Slot& s = slots()[size_t(type)];
  if (!s.factory)
    SPORE_THROW(ErrorKind::RuntimeError, "Unsupported device target ", device_type_name(type),
                ". This build supports ", supported_list(), ". ", how_to_enable(type));
  if (!s.instance) s.instance = s.factory();
  return *s.instance;
}

std::vector<std::string> available_device_targets() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumDeviceTypes; ++i)
    if (slots()[size_t(i)].factory) out.push_back(device_type_name(DeviceType(i)));
  return out;
}

}  // namespace spore
