// Elementwise micro benchmarks, all with 2 threads:
//   BM_Add16M         c = a + b on 16M float32 (bytes = 2 reads + 1 write = 3 * 64 MB per op)
//   BM_Memcpy         a 64 MB memcpy split over the same 2 threads (bytes = read + write = 2 * 64
//                     MB), so bytes/s of the two compare memory traffic like for like
//   BM_Exp16M         y = exp(x) on 16M float32 (read + write)
//   BM_AddDispatch16  a + b on 16 elements: the per-op cost of dispatch (ns per op)
// Add a benchmark: a function and a BENCHMARK line; bench/CMakeLists.txt picks the file up.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "spore/spore.h"

namespace {
constexpr int64_t kN = int64_t(16) << 20;  // 16M elements, 64 MB of float32

void BM_Add16M(benchmark::State& state) {
  spore::set_num_threads(2);
  const spore::Tensor a = spore::uniform({kN}, -1, 1), b = spore::uniform({kN}, -1, 1);
  for (auto _ : state) {
    spore::Tensor c = a + b;
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 3 * 4 * kN);
}
BENCHMARK(BM_Add16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  spore::set_num_threads(2);
  std::vector<float> src(size_t(kN), 1.0f), dst(size_t(kN), 0.0f);
  for (auto _ : state) {
    spore::parallel_for(0, kN, kN / 2, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b, src.data() + b, size_t(e - b) * sizeof(float));
    });
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * 4 * kN);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Exp16M(benchmark::State& state) {
  spore::set_num_threads(2);
  const spore::Tensor a = spore::uniform({kN}, -5, 5);
  for (auto _ : state) {
    spore::Tensor c = spore::exp(a);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 2 * 4 * kN);
}
BENCHMARK(BM_Exp16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AddDispatch16(benchmark::State& state) {
  spore::set_num_threads(2);
  const spore::Tensor a = spore::uniform({16}, -1, 1), b = spore::uniform({16}, -1, 1);
  for (auto _ : state) {
    spore::Tensor c = spore::add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
}
BENCHMARK(BM_AddDispatch16)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
