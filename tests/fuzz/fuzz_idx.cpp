// Fuzz target: IDX files (MNIST / Fashion-MNIST) through MnistDataset, gzipped or raw. The input
// is one file: an images file (magic 0x00000803) is paired with a valid 2-label file, anything else
// is taken as the labels file and paired with a valid 2-image file. A dataset that loads is read
// to the end.
#include <cstring>

#include "fuzz_util.h"
#include "spore/data/dataset.h"

namespace {
// A valid IDX file of n ubyte items with the given item dims.
std::string idx_file(int ndims, std::initializer_list<uint32_t> dims) {
  std::string s = {0, 0, 8, char(ndims)};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int b = 3; b >= 0; --b) s.push_back(char((d >> (8 * b)) & 0xff));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) s.push_back(char(i % 10));
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const bool images = size >= 4 && data[3] == 3;
  fuzz::write_file(
      "train-images-idx3-ubyte",
      images ? std::string(reinterpret_cast<const char*>(data), size) : idx_file(3, {2, 4, 3}));
  fuzz::write_file(
      "train-labels-idx1-ubyte",
      images ? idx_file(1, {2}) : std::string(reinterpret_cast<const char*>(data), size));
  fuzz::expect_clean([] {
    data::Dataset ds = data::MnistDataset(fuzz::scratch_dir(), "train");
    for (auto it = ds.create_tuple_iterator(); auto row = it->next();) {
      if (row->size() != 2 || (*row)[0].dim() != 3) std::abort();
    }
  });
  return 0;
}
