// Helpers shared by the test suites.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "spore/error.h"

namespace spore::test {

// The message of the spore::Error that f throws, or "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// n deterministic values in [lo, hi) from seed (a small LCG: the same on every machine, no
// dependence on the library's own random generator).
inline std::vector<float> lcg_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& e : v) {
    s = s * 1664525u + 1013904223u;
    e = lo + float(s >> 8) / float(1 << 24) * (hi - lo);
  }
  return v;
}

}  // namespace spore::test
