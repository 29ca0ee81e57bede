// Fuzz target: a .npy file through io::parse_npy. A loaded array holds no more bytes than the file.
#include "fuzz_util.h"
#include "spore/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  fuzz::expect_clean([&] {
    const Tensor t =
        io::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    if (size_t(t.numel()) > size) std::abort();
  });
  return 0;
}
