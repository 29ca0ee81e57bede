#include "spore/device.h"

namespace spore {
const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU:
      return "CPU";
    case DeviceType::GPU:
      return "GPU";
    case DeviceType::Ascend:
      return "Ascend";
    case DeviceType::Test:
      return "Test";
  }
  return "?";
}
std::string to_string(Device d) {
  return std::string(device_type_name(d.type)) + ":" + std::to_string(d.index);
}
}  // namespace spore
