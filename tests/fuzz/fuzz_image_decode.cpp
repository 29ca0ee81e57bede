// Fuzz target: image decoding as the data pipeline does it: vision::Decode (JPEG through
// libjpeg-turbo, PNG and the rest through OpenCV) and the DCT-scaled DecodeResize. A decoded image
// must be (H, W, 3) uint8.
#include <cstdlib>

#include "fuzz_util.h"
#include "spore/data/vision.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Images up to 4 Mpixel while fuzzing: larger ones are legal, but each costs a large allocation
  // that would hide real findings behind out-of-memory reports (libjpeg-turbo's own fuzzers do
  // the same). The limit is the one users set, OpenCV's OPENCV_IO_MAX_IMAGE_PIXELS. OpenCV reads
  // it when its library loads, before this runs, so scripts/fuzz.sh and the corpus replay's ctest
  // entry set it in the environment; this covers Spore's own JPEG check when run by hand.
  setenv("OPENCV_IO_MAX_IMAGE_PIXELS", "4194304", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const Tensor bytes = from_buffer(data, {int64_t(size)}, kUInt8);
  fuzz::expect_clean([&] {
    const Tensor img = vision::Decode()(bytes);
    if (img.dim() != 3 || img.size(2) != 3 || img.dtype() != kUInt8) std::abort();
  });
  fuzz::expect_clean([&] {
    const Tensor img = vision::DecodeResize({24, 20})(bytes);
    if (img.shape() != Shape{24, 20, 3}) std::abort();
  });
  return 0;
}
