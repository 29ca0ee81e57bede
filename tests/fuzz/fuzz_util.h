// Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.cpp). Each target defines
// LLVMFuzzerTestOneInput: built with clang and -DSPORE_FUZZ=ON it links libFuzzer; in the normal
// and sanitizer builds it links replay_main.cpp, which runs every file of its corpus once (ctest
// fuzz_corpus_<target>), so every crash ever found stays a regression test.
//
// What counts as a bug: anything but a spore::Error escaping the library (another exception type,
// which the CLI would print as a C++ type name), a sanitizer report, a crash, a hang, or an
// allocation far beyond what the input justifies. spore::Error is the expected answer to bad input.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "spore/error.h"

namespace spore::fuzz {

// A scratch folder for this process (parsers that take paths read the input from a file there):
// /dev/shm when it exists (no disk traffic), else $TMPDIR or /tmp.
// (Never destroyed: the exit handler that removes the folder runs after static destructors of
// objects whose initialisation finished after it was registered, this one included.)
inline const std::string& scratch_dir() {
  static const std::string& dir = *new std::string([] {
    std::string base = "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) {
      const char* t = std::getenv("TMPDIR");
      base = t && *t ? t : "/tmp";
    }
    std::string d = base + "/spore_fuzz_" + std::to_string(::getpid());
    std::string cmd = "mkdir -p '" + d + "'";
    if (std::system(cmd.c_str()) != 0) std::abort();
    std::atexit([] {
      std::string rm = "rm -rf '" + scratch_dir() + "'";
      if (std::system(rm.c_str()) != 0) {
      }
    });
    return d;
  }());
  return dir;
}

// Writes bytes to scratch_dir()/name (replacing it); returns the path.
inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}
inline std::string write_file(const std::string& name, const std::string& s) {
  return write_file(name, reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// Runs fn; a spore::Error is the expected answer to bad input and is swallowed. Anything else
// propagates (libFuzzer reports the uncaught exception as a crash).
template <typename Fn>
void expect_clean(Fn&& fn) {
  try {
    fn();
  } catch (const spore::Error&) {
  }
}

}  // namespace spore::fuzz
