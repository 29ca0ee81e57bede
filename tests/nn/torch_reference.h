// PyTorch's results for tests/nn/rnn_test.cpp and tests/optim/adagrad_lamb_test.cpp: made live by
// tests/nn/rnn_crosscheck.py when /usr/bin/python3 (or $SPORE_PYTHON) imports torch, else read
// from the committed tests/nn/fixtures/rnn_torch.json that the script produced.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "spore/tensor.h"

namespace torch_reference {

struct Reference {
  nlohmann::json doc;
  std::string source;  // "PyTorch, live" or the fixture
};

inline const Reference& get() {
  static const Reference ref = [] {
    namespace fs = std::filesystem;
    const char* env = std::getenv("SPORE_PYTHON");
    const std::string python = env && *env ? env : SPORE_TEST_PYTHON;
    Reference r;
    std::string path = std::string(SPORE_SOURCE_DIR) + "/tests/nn/fixtures/rnn_torch.json";
    r.source = "committed fixture (PyTorch's output)";
    const std::string tmp =
        (fs::temp_directory_path() / ("spore_rnn_" + std::to_string(::getpid()) + ".json"))
            .string();
    if (std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) {
      const std::string cmd =
          python + " " + SPORE_SOURCE_DIR + "/tests/nn/rnn_crosscheck.py " + tmp;
      if (std::system(cmd.c_str()) == 0) {
        path = tmp;
        r.source = "PyTorch, live";
      }
    }
    std::ifstream f(path);
    SPORE_CHECK(f.good(), "cannot read ", path);
    r.doc = nlohmann::json::parse(f);
    fs::remove(tmp);
    return r;
  }();
  return ref;
}

// {"shape": [...], "values": [...]} -> a tensor of dtype.
inline spore::Tensor tensor_of(const nlohmann::json& f, spore::DType dt = spore::kFloat64) {
  return spore::from_vector(f["values"].get<std::vector<double>>(), f["shape"].get<spore::Shape>())
      .to(dt);
}

}  // namespace torch_reference
