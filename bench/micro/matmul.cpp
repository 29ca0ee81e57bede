// sgemm at n = 256, 512, 1024, 2048 (square, row-major, float32), 2 threads each:
//   Spore     spore::matmul (the Matmul primitive: cached oneDNN matmul + allocator output)
//   oneDNN    dnnl_sgemm called directly
//   OpenBLAS  cblas_sgemm (when CMake found a BLAS: SPORE_HAVE_BLAS)
// Counter GFLOP/s = 2 n^3 / time. Run: build/bench/bench_matmul --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <vector>

#include "spore/spore.h"

#ifdef SPORE_HAVE_BLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace {

constexpr int kThreads = 2;

void set_flops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_spore_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  spore::set_num_threads(kThreads);
  spore::Tensor a = spore::randn({n, n}), b = spore::randn({n, n});
  for (auto _ : state) {
    spore::Tensor c = spore::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(state, n);
}

void BM_onednn_sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  omp_set_num_threads(kThreads);
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, n);
}

#ifdef SPORE_HAVE_BLAS
void BM_openblas_sgemm(benchmark::State& state) {
  const int n = int(state.range(0));
  openblas_set_num_threads(kThreads);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, n);
}
BENCHMARK(BM_openblas_sgemm)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif

BENCHMARK(BM_spore_matmul)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_onednn_sgemm)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
