// Fuzz target: COCO annotation JSON (simdjson On-Demand) through CocoDataset. A file that parses
// is read row by row (image bytes undecoded; rows whose image file is missing are errors).
#include "fuzz_util.h"
#include "spore/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const std::string ann = fuzz::write_file("ann.json", data, size);
  static const std::string img = fuzz::write_file("a.jpg", std::string("\xff\xd8\xff not a jpeg"));
  fuzz::expect_clean([&] {
    data::Dataset ds =
        data::CocoDataset(fuzz::scratch_dir(), ann, {.decode = false, .num_parallel_workers = 1});
    int64_t rows = 0;
    for (auto it = ds.create_tuple_iterator(); auto row = it->next(); ++rows) {
      const Tensor& bbox = (*row)[1];
      if (bbox.dim() != 2 || bbox.size(1) != 4 || (*row)[2].size(0) != bbox.size(0)) std::abort();
    }
    if (rows != ds.get_dataset_size()) std::abort();
  });
  return 0;
}
