// Device tags. A Tensor lives on one Device; the backend registry maps DeviceType to a Backend.
#pragma once
#include <cstdint>
#include <string>

namespace spore {

// MindSpore's device_target names: "CPU", "GPU", "Ascend". `Test` is the test device
// (src/backends/test_device/): the CPU's kernels on memory the host may not touch, registered only
// in test programs (or with SPORE_TEST_DEVICE=1), never a target users are offered.
enum class DeviceType : uint8_t { CPU, GPU, Ascend, Test };
inline constexpr int kNumDeviceTypes = 4;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
};

const char* device_type_name(DeviceType t);  // "CPU", "GPU", "Ascend", "Test"
std::string to_string(Device d);             // "CPU:0"

}  // namespace spore
