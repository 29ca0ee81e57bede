// Fuzz target: a compiled model file (.spore, graph/model_file.cpp) through
// CompiledModel::from_buffer and, when it loads, one run on zeros of its inputs' shapes (small
// shapes only). The weights' hash and the meta section's and header's CRC-32s are recomputed over
// the mutated bytes first, so the fuzzer reaches the field parser, the graph checks and the runs
// behind the checksums (a checksum mismatch is tested by tests/deploy/model_file_test.cpp).
#include <zlib.h>

#include <cstring>

#include "fuzz_util.h"
#include "graph/model_file.h"
#include "spore/deploy.h"
#include "spore/ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  std::string b(reinterpret_cast<const char*>(data), size);
  if (b.size() >= graph::kModelHeaderBytes) {
    uint64_t meta_off = 0, meta_bytes = 0;
    std::memcpy(&meta_off, b.data() + 24, 8);
    std::memcpy(&meta_bytes, b.data() + 32, 8);
    if (meta_off <= b.size() && meta_bytes <= b.size() - meta_off) {
      // The weights' hash follows the meta section's five leading strings (u32 length + bytes).
      uint64_t w_off = 0, pos = meta_off;
      std::memcpy(&w_off, b.data() + 40, 8);
      for (int s = 0; s < 5 && pos + 4 <= meta_off + meta_bytes; ++s) {
        uint32_t len = 0;
        std::memcpy(&len, b.data() + pos, 4);
        pos += 4 + uint64_t(len);
      }
      if (pos + 8 <= meta_off + meta_bytes && w_off <= b.size()) {
        uint32_t version = 0;  // the hash depends on the format version
        std::memcpy(&version, b.data() + 8, 4);
        const uint64_t w = graph::model_weights_hash(b.data() + w_off, b.size() - w_off, version);
        std::memcpy(b.data() + pos, &w, 8);
      }
      const uint32_t c = uint32_t(
          crc32(0L, reinterpret_cast<const Bytef*>(b.data() + meta_off), uInt(meta_bytes)));
      std::memcpy(b.data() + 56, &c, 4);
    }
    const uint32_t h = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(b.data()), 60));
    std::memcpy(b.data() + 60, &h, 4);
  }
  fuzz::expect_clean([&] {
    CompiledModel m = CompiledModel::from_buffer(b.data(), b.size(), "fuzz.spore");
    std::vector<Tensor> ins;
    for (const auto& in : m.inputs()) {
      Shape s;
      int64_t n = 1;
      for (int64_t d : in.shape)
        s.push_back(d < 0 ? 1 : d), n *= std::max<int64_t>(1, d < 0 ? 1 : d);
      if (n > (1 << 16)) return;
      ins.push_back(zeros(s, in.dtype));
    }
    (void)m.run(ins);
  });
  return 0;
}
