// Optimizer sharding (ZeRO stage 1): LeNet-5 over the ranks of the test (1, or 2 under ctest
// parallel_mpi_np2) for 20 steps, against one process training on the whole global batch; the
// optimizer state each rank holds; and the refusals (clipping, a used-up optimizer).
#include <gtest/gtest.h>

#include <cmath>

#include "models/lenet.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"
#include "spore/train/wrappers.h"

using namespace spore;

namespace {

struct ShardRun {
  std::shared_ptr<models::LeNet5> net;
  optim::OptimizerPtr opt;
  std::shared_ptr<train::TrainOneStepCell> step;
};

// kind: "momentum" or "adam".
ShardRun make_run(uint64_t seed, const std::string& kind) {
  set_seed(seed);
  ShardRun r;
  r.net = std::make_shared<models::LeNet5>();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  // Two groups (no decay on biases), so the shard keeps each parameter's own weight decay.
  auto groups = optim::split_decay_groups(r.net->named_parameters());
  if (kind == "adam")
    r.opt = std::make_shared<optim::Adam>(groups, 2e-3, optim::AdamOptions{.weight_decay = 1e-3});
  else
    r.opt = std::make_shared<optim::Momentum>(groups, 0.05, 0.9,
                                              optim::MomentumOptions{.weight_decay = 1e-3});
  r.step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(r.net, loss), r.opt);
  return r;
}

// Largest relative loss difference over 20 steps, sharded (this rank's slice of each global batch)
// vs the reference on the whole batch; state_ratio: this rank's state bytes / the reference's.
double run_sharded(const std::string& kind, double* state_ratio) {
  parallel::init("mpi");
  auto g = parallel::world();
  const int R = g->size(), me = g->rank();
  ShardRun ref = make_run(7, kind);
  ShardRun zero = make_run(7, kind);
  const size_t full_state = parallel::optimizer_state_bytes(*ref.opt);
  auto sharded = std::make_shared<parallel::ShardedOptimizer>(zero.opt, g);
  zero.step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(
          zero.net,
          std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
              nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"})),
      sharded);
  *state_ratio = double(parallel::optimizer_state_bytes(*sharded)) / double(full_state);
  const int64_t global_batch = 16, per = global_batch / R;
  double worst = 0;
  for (int s = 0; s < 20; ++s) {
    set_seed(1000 + uint64_t(s));
    Tensor x = randn({global_batch, 1, 28, 28});
    Tensor y = randint(0, 10, {global_batch}, kInt32);
    Tensor l = (*zero.step)(x.slice(0, me * per, (me + 1) * per).contiguous(),
                            y.slice(0, me * per, (me + 1) * per).contiguous())
                   .contiguous()
                   .clone()
                   .reshape({1});
    g->all_reduce(l, parallel::ReduceOp::Mean);
    const double lr = (*ref.step)(x, y).item<double>();
    worst = std::max(worst, std::abs(l.item<double>() - lr) / std::abs(lr));
  }
  EXPECT_EQ(sharded->global_step(), 20);
  // The parameters equal the reference's on every rank (to float32 summation order: the reference
  // sums the whole batch's gradient at once, the ranks their slices, then the reduce-scatter).
  auto a = ref.net->trainable_params(), b = zero.net->trainable_params();
  for (size_t i = 0; i < a.size(); ++i) {
    auto va = a[i].to_vector<float>(), vb = b[i].to_vector<float>();
    for (size_t k = 0; k < va.size(); ++k)
      EXPECT_NEAR(va[k], vb[k], 1e-4 * (1 + std::abs(va[k]))) << i << "[" << k << "]";
  }
  return worst;
}

}  // namespace

TEST(OptimizerShard, MomentumMatchesTheUnshardedStepAndHoldsItsShareOfTheState) {
  double ratio = 0;
  const double d = run_sharded("momentum", &ratio);
  EXPECT_LE(d, 1e-5);
  const int R = parallel::get_group_size();
  EXPECT_LE(ratio, 1.0 / R + 0.05) << "state bytes on this rank / unsharded";
  std::printf(
      "[rank %d of %d] Momentum: max relative loss difference %.3g, state %.3f of the unsharded\n",
      parallel::get_rank(), R, d, ratio);
}

TEST(OptimizerShard, AdamMatchesTheUnshardedStep) {
  double ratio = 0;
  const double d = run_sharded("adam", &ratio);
  EXPECT_LE(d, 1e-5);
  EXPECT_LE(ratio, 1.0 / parallel::get_group_size() + 0.05);
  std::printf("[rank %d] Adam: max relative loss difference %.3g, state %.3f of the unsharded\n",
              parallel::get_rank(), d, ratio);
}

TEST(OptimizerShard, RefusesClippingAndTheWrappedOptimizerIsUsedUp) {
  ShardRun r = make_run(3, "momentum");
  r.opt->set_clip_grad_norm(1.0);
  try {
    parallel::ShardedOptimizer s(r.opt, parallel::world());
    ADD_FAILURE() << "clipping should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("global gradient norm"), std::string::npos) << e.what();
  }
  r.opt->set_clip_grad_norm(0);
  parallel::ShardedOptimizer s(r.opt, parallel::world());
  std::vector<Tensor> grads;
  for (const Tensor& p : r.opt->parameters()) grads.push_back(zeros_like(p));
  try {
    r.opt->step(grads);
    ADD_FAILURE() << "the wrapped optimizer should refuse to step";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moved to a ShardedOptimizer"), std::string::npos)
        << e.what();
  }
}
