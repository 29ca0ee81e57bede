// Fuzz target: a checkpoint loaded into a model (LeNet-5): names, shapes and dtypes that do not
// match the network. Input layout as fuzz_safetensors_header ("<header JSON>\0<data>", the length
// prefix written here). The file is loaded into a fresh LeNet-5 strictly and leniently (what
// `spore eval` and `--resume` do); whatever loads, a forward pass must then run.
#include <cstring>

#include "fuzz_util.h"
#include "models/lenet.h"
#include "spore/io/checkpoint.h"
#include "spore/ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spore;
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t hlen = nul ? size_t(static_cast<const char*>(nul) - p) : size;
  std::string file(8, '\0');
  const uint64_t n = hlen;
  std::memcpy(file.data(), &n, 8);
  file.append(p, hlen);
  if (nul) file.append(p + hlen + 1, size - hlen - 1);
  const std::string path = fuzz::write_file("m.safetensors", file);
  static const Tensor x = zeros({1, 1, 28, 28});
  for (bool strict : {false, true}) {
    fuzz::expect_clean([&] {
      io::Checkpoint ck = io::load_checkpoint(path);
      auto net = std::make_shared<models::LeNet5>();
      net->set_train(false);
      io::LoadReport rep = io::load_param_into_net(*net, ck, strict);
      (void)rep.str();
      const Tensor y = (*net)(x);
      if (y.shape() != Shape{1, 10}) std::abort();
    });
  }
  return 0;
}
