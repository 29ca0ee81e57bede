// Training steps on the GPU for the side-by-side with PyTorch eager
// (bench/peers/cuda_models_torch.py trains the same models the same way; scripts/gpu_check.sh
// prints both and their ratio): LeNet-5 (batch 64, 1x28x28) and ResNet-18 with the CIFAR stem
// (batch 128, 3x32x32), softmax cross-entropy and Momentum 0.01/0.9 (models::momentum_train_step),
// synthetic data already on the GPU, in float32 and in bfloat16 (amp O2: BatchNorm in float32, no
// loss scaling), PyNative and Graph mode; and in Graph mode bfloat16 with a dynamic loss scale, the
// step deciding on overflow on the device ("bfloat16+ls") and, for comparison, on the host
// ("bfloat16+ls_host": set_decide_on_device(false)). A step's
// time is the median over repetitions of a group of steps closed by a device synchronize. One JSON
// object per line: {"model", "mode", "dtype", "batch", "ms", "images_per_s", "loss_first",
// "loss_last"}.
//   bench_cuda_models [--quick] [--filter substring] [--device Test]
// Without a GPU it says so and exits 0. --device Test runs it on the test device (the CPU's kernels
// on guarded memory): a check of the program itself on machines without a GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/test_device/test_device.h"
#include "graph/executor.h"
#include "models/lenet.h"
#include "models/recipe.h"
#include "models/resnet.h"
#include "spore/amp.h"
#include "spore/spore.h"

namespace {
using namespace spore;

// The loss-scale variants: none, deciding on the device, deciding on the host.
enum class Scaling { kNone, kDevice, kHost };

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string filter, device = "GPU";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      device = argv[++i];
  }
  const DeviceType type = device == "Test" ? DeviceType::Test : DeviceType::GPU;
  if (type == DeviceType::Test) enable_test_device();
  if (type == DeviceType::GPU &&
      (!has_backend(DeviceType::GPU) || get_backend(DeviceType::GPU).device_count() == 0)) {
    std::printf("{\"skipped\": \"%s\"}\n",
                has_backend(DeviceType::GPU)
                    ? get_backend(DeviceType::GPU).unavailable_reason().c_str()
                    : "this build has no CUDA backend");
    return 0;
  }
  Backend& gpu = get_backend(type);
  set_device(device);
  const int reps = quick ? 3 : 5;
  for (const char* model : {"lenet", "resnet18"}) {
    for (Mode mode : {Mode::PyNative, Mode::Graph}) {
      for (auto [dt, scaling] : {std::pair{kFloat32, Scaling::kNone},
                                 {kBFloat16, Scaling::kNone},
                                 {kBFloat16, Scaling::kDevice},
                                 {kBFloat16, Scaling::kHost}}) {
        if (scaling != Scaling::kNone && mode != Mode::Graph) continue;
        const std::string dtype =
            std::string(dtype_name(dt)) + (scaling == Scaling::kDevice ? "+ls"
                                           : scaling == Scaling::kHost ? "+ls_host"
                                                                       : "");
        const std::string name =
            std::string(model) + "/" + (mode == Mode::Graph ? "graph" : "pynative") + "/" + dtype;
        if (!filter.empty() && name.find(filter) == std::string::npos) continue;
        try {
          set_seed(0);
          const bool resnet = std::string(model) == "resnet18";
          const int64_t n = resnet ? 128 : 64;
          nn::CellPtr net = resnet ? nn::CellPtr(models::resnet18(10, models::ResNetStem::Cifar))
                                   : nn::CellPtr(std::make_shared<models::LeNet5>());
          std::shared_ptr<nn::Cell> step;
          if (dt == kFloat32) {
            step = models::momentum_train_step(net);
          } else {
            auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
            auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
                nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
            amp::LossScaleManagerPtr m = std::make_shared<amp::FixedLossScaleManager>(1.0, false);
            if (scaling != Scaling::kNone)
              m = std::make_shared<amp::DynamicLossScaleManager>(65536.0);
            step = amp::build_train_network(net, opt, loss, amp::Level::O2, m, {}, dt);
            if (scaling == Scaling::kHost)
              std::dynamic_pointer_cast<train::TrainOneStepWithLossScaleCell>(step)
                  ->set_decide_on_device(false);
          }
          const Tensor x = resnet ? randn({n, 3, 32, 32}) : randn({n, 1, 28, 28});
          const Tensor y = randint(0, 10, {n}, kInt32);
          set_context({.mode = mode});
          auto run = [&] { return step->forward({x, y})[0]; };
          const double loss_first = run().item<double>();  // warm-up (Graph: trace and compile)
          run();
          gpu.synchronize(0);
          auto t0 = std::chrono::steady_clock::now();
          run();
          gpu.synchronize(0);
          const double one = seconds_since(t0);
          const int iters = int(std::clamp((quick ? 0.5 : 1.5) / std::max(one, 1e-6), 3.0, 50.0));
          std::vector<double> per_step;
          Tensor last;
          const int64_t replays_before = graph::capture_replays();
          for (int r = 0; r < reps; ++r) {
            t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) last = run();
            gpu.synchronize(0);
            per_step.push_back(seconds_since(t0) / iters);
          }
          std::sort(per_step.begin(), per_step.end());
          const double s = per_step[per_step.size() / 2];
          // Graph mode: the compiled step's nodes (for the cost per node) and how many timed steps
          // replayed a captured CUDA graph (0 when capture is off or did not take).
          auto* cell = dynamic_cast<train::TrainOneStepCell*>(step.get());
          const size_t nodes = cell && mode == Mode::Graph ? cell->jit_stats().nodes : 0;
          std::printf(
              "{\"model\": \"%s\", \"mode\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, \"ms\": "
              "%.3f, "
              "\"images_per_s\": %.1f, \"loss_first\": %.5f, \"loss_last\": %.5f, \"nodes\": %zu, "
              "\"replays\": %lld}\n",
              model, mode == Mode::Graph ? "graph" : "pynative", dtype.c_str(), (long long)n,
              s * 1e3, double(n) / s, loss_first, last.item<double>(), nodes,
              (long long)(graph::capture_replays() - replays_before));
        } catch (const std::exception& e) {
          std::string msg = e.what();
          for (char& c : msg)
            if (c == '"' || c == '\n' || c == '\\') c = ' ';
          std::printf(
              "{\"model\": \"%s\", \"mode\": \"%s\", \"dtype\": \"%s\", \"error\": \"%s\"}\n",
              model, mode == Mode::Graph ? "graph" : "pynative", dtype.c_str(),
              msg.substr(0, 400).c_str());
        }
        set_context({.mode = Mode::PyNative});
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
