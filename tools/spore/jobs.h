// The CLI's jobs: what `spore train <model>`, `spore eval <model>` and `spore run-check` do.
#pragma once
#include <string>

namespace spore::cli {

struct TrainArgs {
  std::string model = "lenet";  // lenet | mlp | mlp-regression | resnet18
  int64_t epochs = 10;
  int64_t batch_size = 64;
  double lr = 0.01;
  double momentum = 0.9;
  std::string mode = "pynative";  // graph | pynative
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string out = "";  // default out/<model>
  uint64_t seed = 1;
  int threads = 0;           // 0: all cores
  int64_t limit = -1;        // use only the first N training samples (quick runs, tests)
  int64_t eval_limit = -1;   // ... and N test samples
  bool verbose = false;
};
int train(const TrainArgs& a);

struct EvalArgs {
  std::string model = "lenet";
  std::string ckpt;
  std::string data = "/usr/share/datasets/fashion-mnist";
  int64_t batch_size = 256;
  int64_t limit = -1;
};
int eval(const EvalArgs& a);

int run_check();

}  // namespace spore::cli
