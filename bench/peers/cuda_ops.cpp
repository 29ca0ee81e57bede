// Per-op times of the CUDA backend, for the side-by-side with PyTorch
// (bench/peers/cuda_ops_torch.py runs the same ops on the same shapes; scripts/gpu_check.sh prints
// both and their ratio). Each op is called through Spore's public API on GPU tensors, as a user's
// program would (output allocation from the caching allocator and dispatch included): a warm-up,
// then `reps` timed groups of `iters` calls, each group closed by a device synchronize; the median
// per-call time is reported, one JSON object per line: {"op", "dtype", "shape", "us", "gbps" |
// "tflops"}.
//   bench_cuda_ops [--quick] [--filter substring]
// Without a GPU it says so and exits 0 (nothing is measured).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "spore/spore.h"

namespace {
using namespace spore;

struct Case {
  std::string op, dtype, shape;
  std::function<Tensor()> run;
  double bytes = 0, flops = 0;  // per call, for the rate
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
  }
  if (!has_backend(DeviceType::GPU) || get_backend(DeviceType::GPU).device_count() == 0) {
    std::printf("{\"skipped\": \"%s\"}\n",
                has_backend(DeviceType::GPU)
                    ? get_backend(DeviceType::GPU).unavailable_reason().c_str()
                    : "this build has no CUDA backend");
    return 0;
  }
  Backend& gpu_backend = get_backend(DeviceType::GPU);
  const Device gpu{DeviceType::GPU, 0};
  set_seed(0);
  const int64_t big = quick ? (int64_t(1) << 22) : (int64_t(1) << 24);  // elements
  auto on_gpu = [&](Shape s, DType dt) { return randn(s, kFloat32, Device{}).to(dt).to(gpu); };

  std::vector<Case> cases;
  for (DType dt : {kFloat32, kBFloat16}) {
    const std::string dn = dtype_name(dt);
    const double e = double(itemsize(dt));
    const Tensor x = on_gpu({big}, dt), y = on_gpu({big}, dt);
    const Tensor m = on_gpu({4096, big / 4096}, dt), row = on_gpu({big / 4096}, dt);
    const std::string n1 = std::to_string(big), n2 = "4096x" + std::to_string(big / 4096);
    cases.push_back({"add", dn, n1, [=] { return x + y; }, 3 * e * double(big)});
    cases.push_back({"mul_broadcast_row", dn, n2, [=] { return m * row; }, 2 * e * double(big)});
    cases.push_back({"exp", dn, n1, [=] { return exp(x); }, 2 * e * double(big)});
    cases.push_back({"relu", dn, n1, [=] { return relu(x); }, 2 * e * double(big)});
    cases.push_back({"gelu", dn, n1, [=] { return gelu(x); }, 2 * e * double(big)});
    cases.push_back({"cast_to_f32", dn, n1, [=] { return x.to(kFloat32); }, (e + 4) * double(big)});
    cases.push_back({"transpose_copy", dn, n2, [=] { return m.transpose(0, 1).contiguous(); },
                     2 * e * double(big)});
    cases.push_back({"sum_last_axis", dn, n2, [=] { return sum(m, {1}); }, e * double(big)});
    cases.push_back({"sum_first_axis", dn, n2, [=] { return sum(m, {0}); }, e * double(big)});
    cases.push_back(
        {"softmax_last_axis", dn, n2, [=] { return softmax(m, -1); }, 2 * e * double(big)});
    cases.push_back(
        {"log_softmax_last_axis", dn, n2, [=] { return log_softmax(m, -1); }, 2 * e * double(big)});
    const int64_t n = quick ? 2048 : 4096;
    const Tensor a = on_gpu({n, n}, dt), b = on_gpu({n, n}, dt);
    cases.push_back({"matmul", dn, std::to_string(n) + "^3", [=] { return matmul(a, b); }, 0,
                     2.0 * double(n) * n * n});
    const Tensor ba = on_gpu({32, 512, 512}, dt), bb = on_gpu({32, 512, 512}, dt);
    cases.push_back(
        {"bmm", dn, "32x512^3", [=] { return matmul(ba, bb); }, 0, 2.0 * 32 * 512.0 * 512 * 512});
    const Tensor sa = on_gpu({64, 120}, dt),
                 sb = on_gpu({120, 84}, dt);  // LeNet's fc2: launch-bound
    cases.push_back(
        {"matmul_small", dn, "64x120x84", [=] { return matmul(sa, sb); }, 0, 2.0 * 64 * 120 * 84});
  }

  const int reps = quick ? 5 : 11;
  for (const Case& c : cases) {
    if (!filter.empty() && (c.op + "/" + c.dtype).find(filter) == std::string::npos) continue;
    for (int i = 0; i < 3; ++i) c.run();
    gpu_backend.synchronize(0);
    // Enough calls per group for about a millisecond of work (at least 10).
    auto t0 = std::chrono::steady_clock::now();
    c.run();
    gpu_backend.synchronize(0);
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int iters = int(std::clamp(1e-3 / std::max(one, 1e-7), 10.0, 1000.0));
    std::vector<double> per_call;
    for (int r = 0; r < reps; ++r) {
      t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) c.run();
      gpu_backend.synchronize(0);
      per_call.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    const double s = median(per_call);
    std::printf("{\"op\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", \"us\": %.2f", c.op.c_str(),
                c.dtype.c_str(), c.shape.c_str(), s * 1e6);
    if (c.bytes > 0) std::printf(", \"gbps\": %.1f", c.bytes / s / 1e9);
    if (c.flops > 0) std::printf(", \"tflops\": %.2f", c.flops / s / 1e12);
    std::printf("}\n");
    std::fflush(stdout);
  }
  return 0;
}
