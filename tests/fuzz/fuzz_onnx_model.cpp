// Fuzz target: an ONNX model through OnnxModel::load and, when it loads, one PyNative run on
// zeros of its inputs' shapes (small shapes only).
#include "fuzz_util.h"
#include "spore/onnx.h"
#include "spore/ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const std::string path = fuzz::write_file("f.onnx", data, size);
  fuzz::expect_clean([&] {
    OnnxModel m = OnnxModel::load(path);
    std::vector<Tensor> ins;
    for (const auto& in : m.inputs()) {
      Shape s;
      int64_t n = 1;
      for (int64_t d : in.shape)
        s.push_back(d < 0 ? 1 : d), n *= std::max<int64_t>(1, d < 0 ? 1 : d);
      if (n > (1 << 16)) return;
      ins.push_back(zeros(s, in.dtype));
    }
    (void)m.run(ins, /*graph_mode=*/false);
  });
  return 0;
}
