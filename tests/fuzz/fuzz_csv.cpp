// Fuzz target: CSV through CSVDataset, twice: with a header line (all text columns) and with
// three given columns read as int32, float32 and text. A file that parses is read to the end.
#include "fuzz_util.h"
#include "spore/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const std::string path = fuzz::write_file("f.csv", data, size);
  for (int mode = 0; mode < 2; ++mode) {
    fuzz::expect_clean([&] {
      data::CSVOptions o;
      if (mode == 1) {
        o.column_names = {"i", "f", "s"};
        o.column_defaults = {int64_t(-1), 0.5, std::string("none")};
      }
      data::Dataset ds = data::CSVDataset({path}, o);
      for (auto it = ds.create_tuple_iterator(); auto row = it->next();)
        if (row->size() != ds.get_col_names().size()) std::abort();
    });
  }
  return 0;
}
