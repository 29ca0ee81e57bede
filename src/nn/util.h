// Small helpers shared by the nn layer's .cpp files (internal).
#pragma once
#include <sstream>
#include <string>

#include "spore/tensor.h"

namespace spore::nn::detail {

// 0.2 -> "0.2" (std::to_string would give "0.200000").
inline std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
inline std::string fmt_bool(bool b) { return b ? "True" : "False"; }

}  // namespace spore::nn::detail
