// Fuzz target: the CIFAR-10 and CIFAR-100 binary versions. The input is written as test_batch.bin
// (Cifar10Dataset) and test.bin (Cifar100Dataset); a dataset that loads is read to the end.
#include "fuzz_util.h"
#include "spore/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  fuzz::write_file("test_batch.bin", data, size);
  fuzz::write_file("test.bin", data, size);
  for (bool hundred : {false, true}) {
    fuzz::expect_clean([hundred] {
      data::Dataset ds = hundred ? data::Cifar100Dataset(fuzz::scratch_dir(), "test")
                                 : data::Cifar10Dataset(fuzz::scratch_dir(), "test");
      for (auto it = ds.create_tuple_iterator(); auto row = it->next();)
        if ((*row)[0].shape() != Shape{32, 32, 3}) std::abort();
    });
  }
  return 0;
}
