// The versions the CUDA backend runs with, for `spore run-check`.
#pragma once
#include <string>

namespace spore::cuda {
// "CUDA runtime 13.0 (static), driver 13.0, cuBLASLt 13.1.0"
std::string versions();
}  // namespace spore::cuda
