// Fuzz target: an .npz archive through io::load_npz (libzip reads the zip container from a file,
// so each input is written to a per-process temporary file first). An array holds no more bytes
// than deflate can expand the input to.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz_util.h"
#include "spore/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  static const std::string path = "/tmp/spore_fuzz_npz_" + std::to_string(getpid()) + ".npz";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  fuzz::expect_clean([&] {
    for (const auto& [name, t] : io::load_npz(path))
      if (size_t(t.nbytes()) > size * 1032 + 1024) std::abort();
  });
  return 0;
}
