// `spore run-check` (MindSpore users know mindspore.run_check()): the version, the backends this
// build has and their libraries, the CPU features in use, then one tiny training step whose loss
// must fall, proving the install works end to end.
#include <cstdio>

#include "backends/backend.h"
#include "core/parallel.h"
#include "jobs.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/spore.h"
#include "spore/train/wrappers.h"

namespace spore::cli {

int run_check() {
  std::printf("Spore version: %s\n", SPORE_VERSION);
  std::string targets;
  for (const auto& t : available_device_targets())
    targets += (targets.empty() ? "'" : ", '") + t + "'";
  std::printf("device targets in this build: [%s]\n", targets.c_str());
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    if (!has_backend(DeviceType(i))) continue;
    Backend& b = get_backend(DeviceType(i));
    std::printf("  %s: %d device(s); %s\n", std::string(b.name()).c_str(), b.device_count(),
                b.library_versions().c_str());
    for (int d = 0; d < b.device_count(); ++d) {
      const DeviceProperties p = b.properties(d);
      const MemoryInfo m = b.memory_info(d);
      std::printf("    %s:%d %s, %.1f GiB (%.1f GiB free)", std::string(b.name()).c_str(), d,
                  p.name.c_str(), double(m.total) / double(1ull << 30),
                  double(m.free) / double(1ull << 30));
      if (p.compute_major)
        std::printf(", compute capability %d.%d, %d multiprocessors", p.compute_major,
                    p.compute_minor, p.multiprocessors);
      std::printf("\n");
    }
  }
  __builtin_cpu_init();
  std::string feats;
// __builtin_cpu_supports takes a string literal only, hence a macro rather than a loop.
#define SPORE_FEATURE(f)                                                               \
  do {                                                                                 \
    if (__builtin_cpu_supports(f)) feats += std::string(feats.empty() ? "" : " ") + f; \
  } while (0)
  SPORE_FEATURE("sse4.2");
  SPORE_FEATURE("avx");
  SPORE_FEATURE("avx2");
  SPORE_FEATURE("fma");
  SPORE_FEATURE("avx512f");
  SPORE_FEATURE("avx512bw");
  SPORE_FEATURE("avx512vl");
  SPORE_FEATURE("avx512bf16");
#undef SPORE_FEATURE
  std::printf("CPU features: %s; threads: %d\n", feats.c_str(), get_num_threads());

  // One tiny training step on the current device (--device): y = 2x - 1 fitted by a Dense(1, 1)
  // with plain SGD.
  const Device device = current_device();
  set_seed(0);
  Tensor x = rand({32, 1}), y = x * 2.0 - 1.0;
  auto net = std::make_shared<nn::Dense>(1, 1);
  auto step = train::TrainOneStepCell(
      std::make_shared<train::WithLossCell>(net, std::make_shared<nn::MSELoss>()),
      std::make_shared<optim::SGD>(net->trainable_params(), 0.1));
  const double first = step(x, y).item<double>();
  double last = first;
  for (int i = 0; i < 20; ++i) last = step(x, y).item<double>();
  const bool ok = last < first;
  std::printf("tiny training step: loss %.6f -> %.6f after 20 steps: %s\n", first, last,
              ok ? "falls" : "DOES NOT FALL");
  if (!ok) {
    std::printf("Spore run-check FAILED: please report this with the output above.\n");
    return 1;
  }
  std::printf(
      "The result of the training check is correct, Spore has been installed on platform "
      "[%s] successfully!\n",
      device_type_name(device.type));
  return 0;
}

}  // namespace spore::cli
