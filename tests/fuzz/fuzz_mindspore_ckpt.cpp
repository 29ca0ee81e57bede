// Fuzz target: a whole MindSpore .ckpt (protobuf Checkpoint) through io::load_checkpoint, then the
// path `spore convert` takes: what loads is saved as safetensors and as .ckpt and read back equal
// in names and shapes. Every tensor that loads must hold no more bytes than the file.
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
    for (const char* ext : {".safetensors", ".ckpt"}) {
      const std::string out = fuzz::scratch_dir() + "/converted" + ext;
      io::save_checkpoint(ck.tensors, out);
      const io::Checkpoint back = io::load_checkpoint(out);
      if (back.tensors.size() != ck.tensors.size()) std::abort();
      for (size_t i = 0; i < ck.tensors.size(); ++i)
        if (back.tensors[i].first != ck.tensors[i].first ||
            back.tensors[i].second.shape() != ck.tensors[i].second.shape())
          std::abort();
    }
  });
  return 0;
}
