// Helpers shared by the test suites.
#pragma once
#include <functional>
#include <string>

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

}  // namespace spore::test
