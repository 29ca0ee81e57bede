// Device tags. A Tensor lives on one Device; the backend registry maps DeviceType to a Backend.
#pragma once
#include <cstdint>
#include <string>

namespace spore {

// MindSpore's device_target names: "CPU", "GPU", "Ascend".
enum class DeviceType : uint8_t { CPU, GPU, Ascend };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
};

const char* device_type_name(DeviceType t);  // "CPU", "GPU", "Ascend"
std::string to_string(Device d);             // "CPU:0"

}  // namespace spore
