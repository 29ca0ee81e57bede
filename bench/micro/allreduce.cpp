// All-reduce and data-parallel benchmarks, run under MPI by bench/peers/allreduce.sh:
//   bench_allreduce bandwidth        bus bandwidth 1 KB..64 MB, parallel::Group vs MPI_Allreduce
//   bench_allreduce lenet [threads]  LeNet-5 data-parallel training images/s (global batch 64)
//   bench_allreduce fusion           LeNet-5 step time with bucket fusion (64 MB) vs off
// Its own main (not Google Benchmark's): every rank must run the same iterations in lockstep.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "models/lenet.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"
#include "spore/train/wrappers.h"
#ifdef SPORE_HAVE_MPI
#include <mpi.h>
#endif

using namespace spore;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Seconds per call, the slowest rank's (a collective is as fast as its slowest member).
template <typename F>
double time_per_call(parallel::Group& g, int iters, F&& f) {
  for (int i = 0; i < 3; ++i) f();  // warm up
  g.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  Tensor t = from_vector(std::vector<double>{since(t0) / iters}, {1});
  g.all_reduce(t, parallel::ReduceOp::Max);
  return t.item<double>();
}

void bandwidth(parallel::Group& g) {
  const int R = g.size();
  if (g.rank() == 0)
    std::printf(
        "all-reduce (float32, sum) on %d ranks: bus bandwidth = 2(n-1)/n x bytes / time\n"
        "%10s %14s %14s %8s\n",
        R, "bytes", "Group GB/s", "MPI GB/s", "ratio");
  for (int64_t bytes = 1024; bytes <= (64 << 20); bytes *= 4) {
    const int64_t n = bytes / 4;
    Tensor t = ones({n});
    const int iters = int(std::max<int64_t>(5, std::min<int64_t>(2000, (256 << 20) / bytes)));
    const double tg = time_per_call(g, iters, [&] { g.all_reduce(t); });
    double tm = tg;
#ifdef SPORE_HAVE_MPI
    tm = time_per_call(g, iters, [&] {
      MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
#endif
    const double f = R > 1 ? 2.0 * (R - 1) / R : 1.0;
    if (g.rank() == 0)
      std::printf("%10lld %14.3f %14.3f %8.3f\n", (long long)bytes, f * double(bytes) / tg / 1e9,
                  f * double(bytes) / tm / 1e9, tm / tg);
  }
}

// Images/s of data-parallel LeNet-5 training at a global batch of 64 (64 / size per rank).
double lenet(parallel::Group& g, const parallel::CommFusion& fusion, int steps) {
  parallel::AutoParallelContext ctx;
  ctx.parallel_mode = parallel::ParallelMode::DataParallel;
  ctx.comm_fusion = fusion;
  parallel::set_auto_parallel_context(ctx);
  set_seed(1);
  auto net = std::make_shared<models::LeNet5>();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
  auto step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(net, loss), opt);
  if (g.size() > 1)
    parallel::setup_data_parallel(*step, net->parameters_and_buffers(), parallel::world());
  const int64_t per = 64 / g.size();
  Tensor x = randn({per, 1, 28, 28});
  Tensor y = randint(0, 10, {per}, kInt32);
  const double t = time_per_call(g, steps, [&] { (*step)(x, y); });
  return 64.0 / t;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "bandwidth";
  parallel::init("mpi");
  auto g = parallel::world();
  if (mode == "bandwidth") {
    bandwidth(*g);
  } else if (mode == "lenet") {
    if (argc > 2) set_num_threads(std::atoi(argv[2]));
    const double ips = lenet(*g, {}, 60);
    if (g->rank() == 0)
      std::printf("lenet: %d rank(s) x %d thread(s): %.1f images/s (global batch 64)\n", g->size(),
                  get_num_threads(), ips);
  } else if (mode == "fusion") {
    const double on = lenet(*g, {.bucket_mb = 64}, 60), off = lenet(*g, {.bucket_mb = 0}, 60);
    if (g->rank() == 0)
      std::printf(
          "lenet data parallel on %d ranks: fusion on (64 MB buckets) %.1f images/s, off (one "
          "all-reduce per parameter) %.1f images/s, on/off %.3f\n",
          g->size(), on, off, on / off);
  } else {
    std::fprintf(stderr, "usage: bench_allreduce bandwidth|lenet [threads]|fusion\n");
    return 2;
  }
  parallel::release();
  return 0;
}
