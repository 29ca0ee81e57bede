// Fuzz target: the safetensors JSON header and body, with the length prefix made right. The input
// is "<header JSON>\0<data section>" (no NUL: all header); the target writes the 8-byte length
// itself, so mutations reach the JSON validation and the offset / shape / dtype checks instead of
// dying at the length check. Loaded tensors are saved and loaded again (the round trip must agree).
#include <cstring>

#include "fuzz_util.h"
#include "spore/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t hlen = nul ? size_t(static_cast<const char*>(nul) - p) : size;
  std::string file(8, '\0');
  const uint64_t n = hlen;
  std::memcpy(file.data(), &n, 8);
  file.append(p, hlen);
  if (nul) file.append(p + hlen + 1, size - hlen - 1);
  const std::string path = fuzz::write_file("h.safetensors", file);
  fuzz::expect_clean([&] {
    io::Checkpoint ck = io::load_checkpoint(path);
    const std::string again = fuzz::scratch_dir() + "/h2.safetensors";
    io::save_checkpoint(ck.tensors, again, ck.metadata);
    io::Checkpoint ck2 = io::load_checkpoint(again);
    if (ck2.tensors.size() != ck.tensors.size() || ck2.metadata != ck.metadata) std::abort();
    for (size_t i = 0; i < ck.tensors.size(); ++i) {
      const Tensor &a = ck.tensors[i].second, &b = ck2.tensors[i].second;
      if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.nbytes() != b.nbytes() ||
          (a.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) != 0))
        std::abort();
    }
  });
  return 0;
}
