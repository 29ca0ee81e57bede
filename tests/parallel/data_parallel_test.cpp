// Data parallel: 2-rank training of LeNet-5 for 20 steps against 1-rank training on the same
// global batch (every rank also runs the 1-rank reference itself); bucket layouts; the
// mismatched-parameter start error. One process: the reducer is the identity and still matches.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/test_device/test_device.h"
#include "models/lenet.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"
#include "spore/train/wrappers.h"

using namespace spore;

namespace {

parallel::GroupPtr group() {
  parallel::init("mpi");
  return parallel::world();
}

struct Trainer {
  std::shared_ptr<models::LeNet5> net;
  std::shared_ptr<optim::Momentum> opt;
  std::shared_ptr<train::TrainOneStepCell> step;
  explicit Trainer(uint64_t seed, Device device = {}) {
    const DeviceGuard on(device);  // the parameters and optimizer state live there
    set_seed(seed);
    net = std::make_shared<models::LeNet5>();
    auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
        nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
    opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.05, 0.9);
    step = std::make_shared<train::TrainOneStepCell>(
        std::make_shared<train::WithLossCell>(net, loss), opt);
  }
};

// 20 steps of data parallel (this rank's half of each global batch) vs the reference on the
// whole batch; returns the largest relative loss difference.
// `device`: where the data-parallel trainer runs (the reference stays on the host).
double run_pair(const parallel::CommFusion& fusion, bool overlap, size_t* buckets = nullptr,
                Device device = {}) {
  auto g = group();
  const int R = g->size(), me = g->rank();
  const int64_t global_batch = 16;
  parallel::AutoParallelContext ctx;
  ctx.parallel_mode = parallel::ParallelMode::DataParallel;
  ctx.comm_fusion = fusion;
  ctx.overlap = overlap;
  parallel::set_auto_parallel_context(ctx);
  Trainer ref(7);
  Trainer dp(7 + uint64_t(me) * 1000, device);  // other inits elsewhere: the broadcast fixes them
  auto reducer = parallel::setup_data_parallel(*dp.step, dp.net->parameters_and_buffers(), g);
  if (buckets) *buckets = reducer->buckets().size();
  double worst = 0;
  for (int s = 0; s < 20; ++s) {
    set_seed(1000 + uint64_t(s));  // the same global batch on every rank
    Tensor x = randn({global_batch, 1, 28, 28});
    Tensor y = randint(0, 10, {global_batch}, kInt32);
    const int64_t per = global_batch / R;
    Tensor xs = x.slice(0, me * per, (me + 1) * per).contiguous();
    Tensor ys = y.slice(0, me * per, (me + 1) * per).contiguous();
    Tensor l = (*dp.step)(xs.to(device), ys.to(device)).contiguous().clone().reshape({1});
    g->all_reduce(l, parallel::ReduceOp::Mean);  // the global batch's mean loss
    const double ld = l.item<double>();
    const double lr = (*ref.step)(x, y).item<double>();
    worst = std::max(worst, std::abs(ld - lr) / std::abs(lr));
  }
  // Every rank holds the same parameters at the end.
  for (const Tensor& p : dp.net->trainable_params()) {
    Tensor mx = p.contiguous().clone(), mn = p.contiguous().clone();
    g->all_reduce(mx, parallel::ReduceOp::Max);
    g->all_reduce(mn, parallel::ReduceOp::Min);
    EXPECT_EQ(mx.to_vector<float>(), mn.to_vector<float>());
  }
  parallel::reset_auto_parallel_context();
  return worst;
}

}  // namespace

TEST(DataParallel, LeNetTwoRanksMatchOneRankDefaultBucket) {
  size_t nb = 0;
  const double d = run_pair({}, true, &nb);
  EXPECT_EQ(nb, 1u);  // LeNet (~250 KB) fits one 64 MB bucket
  EXPECT_LE(d, 1e-5) << "relative loss difference over 20 steps";
  std::printf("[ranks %d] max relative loss difference: %.3g\n", parallel::get_group_size(), d);
}

// The trainer on a device (the test device: memory the host cannot touch outside a copy): the
// buckets are packed there and the MPI group stages them through the host.
TEST(DataParallel, LeNetTwoRanksOnADeviceMatchOneRank) {
  enable_test_device();
  size_t nb = 0;
  EXPECT_LE(run_pair({.bucket_mb = 0.05}, true, &nb, Device{DeviceType::Test, 0}), 1e-5);
  EXPECT_GT(nb, 2u);
}

TEST(DataParallel, LeNetSmallBucketsFusionOffAndIndexMode) {
  size_t nb = 0;
  EXPECT_LE(run_pair({.bucket_mb = 0.05}, true, &nb), 1e-5);
  EXPECT_GT(nb, 2u);
  EXPECT_LE(run_pair({.bucket_mb = 0}, true, &nb), 1e-5);  // one all-reduce per parameter
  EXPECT_EQ(nb, 8u);  // LeNet-5 has 8 parameters (bias-free convolutions)
  EXPECT_LE(run_pair({.bucket_mb = 64, .fusion_indices = {3, 6}}, false, &nb), 1e-5);
  EXPECT_EQ(nb, 3u);
}

TEST(DataParallel, MismatchedParametersFailAtStartNamingThem) {
  auto g = group();
  if (g->size() < 2) GTEST_SKIP() << "needs 2 ranks (ctest parallel_mpi_np2)";
  // Rank 1 builds a LeNet with 12 classes: fc3's weight and bias differ.
  auto net = std::make_shared<models::LeNet5>(g->rank() == 1 ? 12 : 10);
  try {
    parallel::broadcast_parameters(net->parameters_and_buffers(), *g);
    FAIL() << "expected a mismatch error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 vs rank 0"), std::string::npos) << m;
    EXPECT_NE(m.find("fc3"), std::string::npos) << m;
    EXPECT_NE(m.find("(12, 84)"), std::string::npos) << m;
    EXPECT_NE(m.find("(10, 84)"), std::string::npos) << m;
    if (g->rank() == 0) std::printf("mismatch error:\n%s\n", m.c_str());
  }
  g->barrier();  // the group still works after the error
}

TEST(DataParallel, GradReadyHookReportsEveryParameterOnce) {
  Trainer t(3);
  std::vector<int> seen(t.opt->parameters().size(), 0);
  t.step->set_grad_ready_hook([&](size_t i, const Tensor& g) {
    ASSERT_LT(i, seen.size());
    EXPECT_EQ(g.shape(), t.opt->parameters()[i].shape());
    ++seen[i];
  });
  (*t.step)(randn({4, 1, 28, 28}), randint(0, 10, {4}, kInt32));
  for (int s : seen) EXPECT_EQ(s, 1);
}
