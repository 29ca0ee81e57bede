// Fuzz target: a whole MindSpore .ckpt (protobuf Checkpoint) through io::load_checkpoint. Every
// tensor that loads must hold no more bytes than the file.
#include "fuzz_util.h"
#include "spore/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const std::string path = fuzz::write_file("f.ckpt", data, size);
  fuzz::expect_clean([&] {
    io::Checkpoint ck = io::load_checkpoint(path);
    size_t total = 0;
    for (const auto& [name, t] : ck.tensors) total += t.numel();
    if (total > size) std::abort();  // more elements than the file has bytes
  });
  return 0;
}
