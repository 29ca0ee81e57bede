// Backend registry: backends register themselves at load time; lookups of a backend this build
// lacks give MindSpore's clarity (which targets exist, and what would make this one available).
#include <array>
#include <cstring>
#include <vector>

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
  for (const auto& name : available_device_targets())
    s += (s.size() > 1 ? ", '" : "'") + name + "'";
  return s + "]";
}
std::string how_to_enable(DeviceType t) {
  switch (t) {
    case DeviceType::GPU:
      return "The 'GPU' target: " + detail::cuda_plugin_status() + ".";
    case DeviceType::Ascend:
      return "The 'Ascend' target needs a vendor NPU backend (src/backends/ascend) built against "
             "CANN; this build has none. Use set_device(\"CPU\") meanwhile.";
    default:
      return "";
  }
}
}  // namespace

bool Backend::supports(ops::OpId op, DType dtype) const {
  const ops::KernelEntry* k = ops::find_kernel(op, type());
  return k && k->supports(dtype);
}

double Event::ms_since(Event&) {
  SPORE_THROW(ErrorKind::NotImplemented,
              "[event] this event does not time; make it with Backend::new_timing_event");
}

double HostClockEvent::ms_since(Event& earlier) {
  auto* e = dynamic_cast<HostClockEvent*>(&earlier);
  SPORE_CHECK(e != nullptr, "[event] ms_since: the earlier event is of another backend");
  return std::chrono::duration<double, std::milli>(at_ - e->at_).count();
}

void Backend::begin_capture(Stream&) {
  SPORE_THROW(ErrorKind::NotImplemented, "[capture] the ", name(),
              " backend cannot capture a stream's work (supports_capture() is false)");
}
std::unique_ptr<CapturedWork> Backend::end_capture(Stream&, std::string& why) {
  why = std::string("the ") + std::string(name()) + " backend cannot capture";
  return nullptr;
}

namespace detail {
bool register_backend(DeviceType type, BackendFactory factory) {
  slots()[size_t(type)].factory = factory;
  return true;
}
}  // namespace detail

// Plugins load at the first question about a device other than the CPU (loading CUDA's libraries
// costs a CPU-only process ~0.2 s it need not pay).
bool has_backend(DeviceType type) {
  if (type != DeviceType::CPU) detail::load_backend_plugins();
  return slots()[size_t(type)].factory != nullptr;
}

Backend& get_backend(DeviceType type) {
  if (type != DeviceType::CPU) detail::load_backend_plugins();
  Slot& s = slots()[size_t(type)];
  if (!s.factory)
    SPORE_THROW(ErrorKind::RuntimeError, "Unsupported device target ", device_type_name(type),
                ". This build supports ", supported_list(), ". ", how_to_enable(type));
  if (!s.instance) s.instance = s.factory();
  return *s.instance;
}

// ---- current stream -----------------------------------------------------------------------------
namespace {
// Per thread, the streams StreamGuards made current, by device (a short list: few devices).
thread_local std::vector<std::pair<Device, Stream*>> t_current;
Stream** find_current(Device d) {
  for (auto& [dev, s] : t_current)
    if (dev == d) return &s;
  return nullptr;
}
}  // namespace

Stream& current_stream(Device device) {
  if (Stream** s = find_current(device); s && *s) return **s;
  return get_backend(device.type).default_stream(device.index);
}
StreamGuard::StreamGuard(Stream& stream) : device_(stream.device()) {
  Stream** s = find_current(device_);
  if (!s) {
    t_current.push_back({device_, nullptr});
    s = &t_current.back().second;
  }
  prev_ = *s;
  *s = &stream;
}
StreamGuard::~StreamGuard() {
  if (Stream** s = find_current(device_)) *s = prev_;
}

// ---- copies -------------------------------------------------------------------------------------
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes,
                bool blocking) {
  if (nbytes == 0) return;
  const bool dst_host = dst_dev.type == DeviceType::CPU, src_host = src_dev.type == DeviceType::CPU;
  if (dst_host && src_host) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (!dst_host && !src_host && dst_dev.type != src_dev.type) {  // two backends: through the host
    std::vector<unsigned char> staging(nbytes);
    copy_bytes(staging.data(), Device{}, src, src_dev, nbytes, true);
    copy_bytes(dst, dst_dev, staging.data(), Device{}, nbytes, true);
    return;
  }
  // The device side's backend copies, on that device's current stream (the destination's for a
  // copy within one backend, so later work there is ordered after it).
  const Device side = dst_host ? src_dev : dst_dev;
  Stream& stream = current_stream(side);
  get_backend(side.type).copy_async(dst, dst_dev, src, src_dev, nbytes, stream);
  if (blocking) stream.synchronize();
}

std::vector<std::string> available_device_targets() {
  detail::load_backend_plugins();
  std::vector<std::string> out;
  for (int i = 0; i < kNumDeviceTypes; ++i)
    if (slots()[size_t(i)].factory) out.push_back(device_type_name(DeviceType(i)));
  return out;
}

}  // namespace spore
