// Fuzz target: a whole safetensors file (8-byte header length, JSON header, data) through
// io::load_checkpoint. Every tensor that loads must hold exactly its shape's bytes.
#include "fuzz_util.h"
#include "spore/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const std::string path = fuzz::write_file("f.safetensors", data, size);
  fuzz::expect_clean([&] {
    io::Checkpoint ck = io::load_checkpoint(path);
    size_t total = 0;
    for (const auto& [name, t] : ck.tensors) total += t.nbytes();
    if (total > size) std::abort();  // more data than the file holds
  });
  return 0;
}
