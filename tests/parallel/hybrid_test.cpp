// Hybrid parallelism: pairs of dimensions combined through Model, each against one process on the
// whole batch. ZeRO-1 (enable_parallel_optimizer) with operator sharding (semi_auto_parallel):
// LeNet-5 and the transformer classifier on dp x mp (2 x 2 on 4 ranks; mp = 2 on 2 ranks), with
// the optimizer state bytes each rank keeps. Runs under ctest parallel_mpi_np2 and
// parallel_mpi_np4_hybrid; one process skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "models/lenet.h"
#include "models/transformer.h"
#include "spore/amp.h"
#include "spore/data/dataset.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"
#include "spore/spore.h"
#include "spore/train/callbacks.h"
#include "spore/train/model.h"

using namespace spore;

namespace {

int ranks() {
  if (parallel::launcher_rank_size().second > 1) parallel::init("mpi");
  return parallel::get_group_size();
}

nn::CellPtr ce_loss() {
  return std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;  // whole, after training (gathered when cut)
  size_t state_bytes = 0;      // this rank's optimizer state
};

// One epoch of `batch`-row steps through Model. dp * mp > 1: semi_auto_parallel on a dp x mp mesh
// (the batch cut over dp by dataset_strategy, every rank given the whole batch), with ZeRO-1 when
// `zero`. `build` makes the network (same seed: same weights) and cuts it when asked.
Run train(const std::function<std::shared_ptr<nn::Cell>(int64_t dp, int64_t mp)>& build,
          const std::vector<int64_t>& input_strategy_tail, const Tensor& x, const Tensor& y,
          int64_t batch, int64_t dp, int64_t mp, bool zero, const std::string& kind) {
  if (dp * mp > 1) {
    std::vector<int64_t> xs{dp};
    xs.insert(xs.end(), input_strategy_tail.begin(), input_strategy_tail.end());
    parallel::set_auto_parallel_context({.parallel_mode = parallel::ParallelMode::SemiAutoParallel,
                                         .enable_parallel_optimizer = zero,
                                         .dataset_strategy = {xs, {dp}},
                                         .full_batch = true});
  }
  set_seed(11);
  auto net = build(dp, mp);
  // Momentum's update is linear in the gradient, so parameters compare tightly; Adam checks that
  // per-element state (two moments) is cut the same way.
  optim::OptimizerPtr opt =
      kind == "Adam"
          ? optim::OptimizerPtr(std::make_shared<optim::Adam>(net->trainable_params(), 1e-3))
          : optim::OptimizerPtr(
                std::make_shared<optim::Momentum>(net->trainable_params(), 0.05, 0.9));
  Run r;
  {
    train::Model model(net, ce_loss(), opt);
    model.train(1, data::TensorDataset({x, y}, {"x", "y"}).batch(batch),
                {train::LambdaCallback(
                    {.on_step_end = [&](train::RunContext& c) { r.losses.push_back(c.loss); }})});
    r.state_bytes = parallel::optimizer_state_bytes(*model.optimizer());
  }
  for (const Tensor& p : net->trainable_params())
    r.params.push_back(dp * mp > 1 ? parallel::gather_whole(p) : p.clone());
  parallel::reset_auto_parallel_context();
  return r;
}

struct Diff {
  double loss = 0, param = 0;  // largest absolute difference
};
Diff compare(const Run& a, const Run& b) {
  Diff d;
  EXPECT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size() && i < b.losses.size(); ++i)
    d.loss = std::max(d.loss, std::abs(a.losses[i] - b.losses[i]));
  EXPECT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size() && i < b.params.size(); ++i) {
    const auto u = a.params[i].to_vector<float>(), v = b.params[i].to_vector<float>();
    EXPECT_EQ(u.size(), v.size());
    for (size_t k = 0; k < u.size() && k < v.size(); ++k)
      d.param = std::max(d.param, double(std::abs(u[k] - v[k])));
  }
  return d;
}

// The meshes of the test: dp 2 x mp 2 on 4 ranks; mp 2 (the cut weights' replica groups are single
// ranks, the whole tensors' all ranks) and dp 2 on 2 ranks.
std::vector<std::pair<int64_t, int64_t>> meshes(int n) {
  if (n == 4) return {{2, 2}};
  return {{1, 2}, {2, 1}};
}

void check_zero_with_semi_auto(
    const char* what, const std::function<std::shared_ptr<nn::Cell>(int64_t, int64_t)>& build,
    const std::vector<int64_t>& tail, const Tensor& x, const Tensor& y, int64_t batch,
    double param_tol) {
  const int n = ranks();
  for (const std::string kind : {"Momentum", "Adam"}) {
    const Run one = train(build, tail, x, y, batch, 1, 1, false, kind);
    for (auto [dp, mp] : meshes(n)) {
      SCOPED_TRACE(std::string(what) + " " + kind + " dp=" + std::to_string(dp) +
                   " mp=" + std::to_string(mp));
      const Run cut = train(build, tail, x, y, batch, dp, mp, false, kind);
      const Run zero = train(build, tail, x, y, batch, dp, mp, true, kind);
      const Diff d = compare(zero, one), dc = compare(cut, one);
      // The state a rank keeps: every piece's state cut over the ranks holding that piece.
      Tensor most = scalar_tensor(double(zero.state_bytes), kFloat64).contiguous().clone();
      parallel::world()->all_reduce(most, parallel::ReduceOp::Max);
      const double ratio = most.item<double>() / double(cut.state_bytes);
      if (parallel::get_rank() == 0)
        std::printf(
            "[hybrid] %s %s, ZeRO-1 x semi_auto dp=%lld mp=%lld, %zu steps: loss %.6f -> %.6f, "
            "max abs difference to one process: loss %.3g, parameters %.3g (semi_auto without "
            "ZeRO-1: %.3g, %.3g); optimizer state bytes per rank: one process %zu, semi_auto %zu, "
            "+ ZeRO-1 %zu on rank 0, %.0f at most (%.3f of semi_auto's)\n",
            what, kind.c_str(), (long long)dp, (long long)mp, zero.losses.size(),
            zero.losses.front(), zero.losses.back(), d.loss, d.param, dc.loss, dc.param,
            one.state_bytes, cut.state_bytes, zero.state_bytes, most.item<double>(), ratio);
      EXPECT_LE(d.loss, 1e-5);
      EXPECT_LE(d.param, param_tol);
      // The cut weights' state drops by dp, the whole tensors' by dp x mp; padding aside. (With
      // dp = 1 only the whole tensors' state is cut.)
      EXPECT_LE(ratio, dp > 1 ? 1.0 / double(dp) + 0.01 : 0.99);
      EXPECT_GT(zero.state_bytes, 0u);
    }
  }
}

}  // namespace

TEST(Hybrid, OptimizerShardingWithOperatorShardingLeNet) {
  if (ranks() < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  set_seed(3);
  const Tensor x = randn({64, 1, 28, 28});
  const Tensor y = randint(0, 10, {64}, kInt32);
  check_zero_with_semi_auto(
      "LeNet-5",
      [](int64_t dp, int64_t mp) {
        auto net = std::make_shared<models::LeNet5>();
        if (dp * mp > 1) net->shard(dp, mp);
        return net;
      },
      {1, 1, 1}, x, y, 16, 1e-5);
}

TEST(Hybrid, OptimizerShardingWithOperatorShardingTransformer) {
  if (ranks() < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  const models::TransformerOptions o{
      .vocab = 32, .seq = 8, .dim = 32, .heads = 4, .layers = 2, .classes = 10};
  auto [ids, labels] = models::make_token_task(64, o, 7);
  check_zero_with_semi_auto(
      "transformer",
      [o](int64_t dp, int64_t mp) {
        auto net = std::make_shared<models::TransformerClassifier>(o);
        if (dp * mp > 1) net->shard(dp, mp);
        return net;
      },
      {1}, ids, labels, 16, 5e-5);  // Adam divides near-zero gradients by their size
}

// Pipeline stages whose layers are cut over the stage's ranks (pipeline_stages x semi_auto_parallel
// through Model): 4 ranks = 2 stages x 2 ranks per stage, the stage's 2 ranks as mp = 2 (the
// layers' pieces) or dp = 2 (the batch cut inside the stage), each with and without ZeRO-1;
// 2 ranks: 2 stages of one rank. Against one process on the whole batch: the step losses and the
// whole trained network (Model::gather_parameters, which makes each stage's pieces whole).
namespace {

using BuildSeq =
    std::function<std::shared_ptr<nn::SequentialCell>(int64_t stages, int64_t dp, int64_t mp)>;

struct PipeRun {
  std::vector<double> losses;
  std::vector<std::pair<std::string, Tensor>> params;  // whole, by name
  size_t state_bytes = 0;
};

PipeRun train_pipelined(const BuildSeq& build, const std::vector<int64_t>& tail, const Tensor& x,
                        const Tensor& y, int64_t P, int64_t dp, int64_t mp, bool zero,
                        const std::string& kind) {
  if (P > 1) {
    std::vector<int64_t> xs{dp};
    xs.insert(xs.end(), tail.begin(), tail.end());
    parallel::set_auto_parallel_context({.parallel_mode = parallel::ParallelMode::SemiAutoParallel,
                                         .enable_parallel_optimizer = zero,
                                         .dataset_strategy = {xs, {dp}},
                                         .full_batch = true,
                                         .pipeline_stages = P});
  }
  set_seed(11);
  auto net = build(P, dp, mp);
  optim::OptimizerPtr opt =
      kind == "Adam"
          ? optim::OptimizerPtr(std::make_shared<optim::Adam>(net->trainable_params(), 1e-3))
          : optim::OptimizerPtr(
                std::make_shared<optim::Momentum>(net->trainable_params(), 0.05, 0.9));
  PipeRun r;
  train::Model model(net, ce_loss(), opt);
  model.train(1, data::TensorDataset({x, y}, {"x", "y"}).batch(16),
              {train::LambdaCallback(
                  {.on_step_end = [&](train::RunContext& c) { r.losses.push_back(c.loss); }})});
  r.state_bytes = parallel::optimizer_state_bytes(*model.optimizer());
  r.params = P > 1 ? model.gather_parameters() : net->parameters_and_buffers();
  parallel::reset_auto_parallel_context();
  return r;
}

void check_pipeline_with_semi_auto(const char* what, const BuildSeq& build,
                                   const std::vector<int64_t>& tail, const Tensor& x,
                                   const Tensor& y, double param_tol) {
  const int n = ranks();
  const int64_t P = 2, per_stage = n / P;
  for (const std::string kind : {"Momentum", "Adam"}) {
    const PipeRun one = train_pipelined(build, tail, x, y, 1, 1, 1, false, kind);
    std::vector<std::pair<int64_t, int64_t>> meshes = {{1, per_stage}};
    if (per_stage > 1) meshes.push_back({per_stage, 1});
    for (auto [dp, mp] : meshes)
      for (bool zero : {false, true}) {
        SCOPED_TRACE(std::string(what) + " " + kind + " pp=2 dp=" + std::to_string(dp) +
                     " mp=" + std::to_string(mp) + (zero ? " ZeRO-1" : ""));
        const PipeRun p = train_pipelined(build, tail, x, y, P, dp, mp, zero, kind);
        double dl = 0, dw = 0;
        ASSERT_EQ(p.losses.size(), one.losses.size());
        for (size_t i = 0; i < p.losses.size(); ++i)
          dl = std::max(dl, std::abs(p.losses[i] - one.losses[i]));
        size_t matched = 0;
        for (const auto& [name, t] : p.params)
          for (const auto& [n1, t1] : one.params)
            if (n1 == name) {
              ++matched;
              ASSERT_EQ(t.shape(), t1.shape()) << name;
              const auto u = t.to_vector<float>(), v = t1.to_vector<float>();
              for (size_t k = 0; k < u.size(); ++k)
                dw = std::max(dw, double(std::abs(u[k] - v[k])));
            }
        EXPECT_GT(matched, 0u);
        if (parallel::get_rank() == 0) EXPECT_EQ(matched, one.params.size());
        Tensor worst = scalar_tensor(dw, kFloat64).contiguous().clone();
        Tensor most = scalar_tensor(double(p.state_bytes), kFloat64).contiguous().clone();
        parallel::world()->all_reduce(worst, parallel::ReduceOp::Max);
        parallel::world()->all_reduce(most, parallel::ReduceOp::Max);
        if (parallel::get_rank() == 0)
          std::printf(
              "[hybrid] %s %s, pp=2 x (dp=%lld, mp=%lld)%s on %d ranks, %zu steps: loss %.6f -> "
              "%.6f, max abs difference to one process: loss %.3g, parameters %.3g; optimizer "
              "state bytes per rank at most %.0f (one process %zu)\n",
              what, kind.c_str(), (long long)dp, (long long)mp, zero ? " + ZeRO-1" : "", n,
              p.losses.size(), p.losses.front(), p.losses.back(), dl, worst.item<double>(),
              most.item<double>(), one.state_bytes);
        EXPECT_LE(dl, 1e-5);
        EXPECT_LE(worst.item<double>(), param_tol);
      }
  }
}

}  // namespace

TEST(Hybrid, PipelineWithOperatorShardingLeNet) {
  if (ranks() != 2 && ranks() != 4) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  set_seed(3);
  const Tensor x = randn({64, 1, 28, 28});
  const Tensor y = randint(0, 10, {64}, kInt32);
  check_pipeline_with_semi_auto(
      "LeNet-5",
      [](int64_t stages, int64_t dp, int64_t mp) {
        auto net = models::lenet5_sequential(stages);
        if (stages > 1) {  // LeNet5::shard's cuts on the sequential network's layers
          const auto& c = net->cells();
          std::static_pointer_cast<nn::Conv2d>(c[0])->shard({{dp, 1, 1, 1}, {mp, 1, 1, 1}});
          std::static_pointer_cast<nn::Conv2d>(c[3])->shard({{dp, mp, 1, 1}, {1, mp, 1, 1}});
          std::static_pointer_cast<nn::Dense>(c[7])->shard({{dp, 1}, {mp, 1}});
          std::static_pointer_cast<nn::Dense>(c[9])->shard({{dp, mp}, {1, mp}});
        }
        return net;
      },
      {1, 1, 1}, x, y, 1e-5);
}

TEST(Hybrid, PipelineWithOperatorShardingTransformer) {
  if (ranks() != 2 && ranks() != 4) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  const models::TransformerOptions o{
      .vocab = 32, .seq = 8, .dim = 32, .heads = 4, .layers = 2, .classes = 10};
  auto [ids, labels] = models::make_token_task(64, o, 7);
  check_pipeline_with_semi_auto(
      "transformer",
      [o](int64_t stages, int64_t dp, int64_t mp) {
        auto net = models::transformer_sequential(o, stages);
        if (stages > 1)
          for (int64_t i = 0; i < o.layers; ++i)
            std::static_pointer_cast<models::TransformerBlock>(net->cells()[size_t(1 + i)])
                ->shard(dp, mp);
        return net;
      },
      {1}, ids, labels, 5e-5);  // Adam divides near-zero gradients by their size
}

// amp (O2, float16, a fixed loss scale of 1024) and gradient accumulation with operator sharding,
// alone (dp x mp) and inside pipeline stages (pp x mp): LeNet-5 against one process with the same
// amp level and accumulation. float16 rounds a cut sum differently from a whole one, so the
// tolerances are float16's; float32 with accumulation is held to float32's.
TEST(Hybrid, AmpAndGradAccumulationWithOperatorSharding) {
  const int n = ranks();
  if (n != 4) GTEST_SKIP() << "needs 4 MPI ranks (dp 2 x mp 2, pp 2 x mp 2)";
  set_seed(3);
  const Tensor x = randn({64, 1, 28, 28});
  const Tensor y = randint(0, 10, {64}, kInt32);
  struct Out {
    std::vector<double> losses;
    std::vector<std::pair<std::string, Tensor>> params;
  };
  // pp 1: LeNet5 (dp x mp = 2 x 2 when sharded); pp 2: lenet5_sequential in 2 stages x mp 2.
  auto run = [&](bool sharded, int64_t pp, const std::string& amp, int64_t k) {
    const int64_t dp = pp > 1 ? 1 : 2, mp = 2;
    if (sharded)
      parallel::set_auto_parallel_context(
          {.parallel_mode = parallel::ParallelMode::SemiAutoParallel,
           .gradient_accumulation_steps = k,
           .dataset_strategy = {{dp, 1, 1, 1}, {dp}},
           .full_batch = true,
           .pipeline_stages = pp});
    else
      parallel::set_auto_parallel_context({.gradient_accumulation_steps = k});
    set_seed(11);
    std::shared_ptr<nn::Cell> net;
    if (pp > 1) {
      auto seq = models::lenet5_sequential(pp);
      if (sharded) {
        const auto& c = seq->cells();
        std::static_pointer_cast<nn::Conv2d>(c[0])->shard({{dp, 1, 1, 1}, {mp, 1, 1, 1}});
        std::static_pointer_cast<nn::Conv2d>(c[3])->shard({{dp, mp, 1, 1}, {1, mp, 1, 1}});
        std::static_pointer_cast<nn::Dense>(c[7])->shard({{dp, 1}, {mp, 1}});
        std::static_pointer_cast<nn::Dense>(c[9])->shard({{dp, mp}, {1, mp}});
      }
      net = seq;
    } else {
      auto lenet = std::make_shared<models::LeNet5>();
      if (sharded) lenet->shard(dp, mp);
      net = lenet;
    }
    auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.05, 0.9);
    amp::LossScaleManagerPtr scale;
    if (amp != "O0") scale = std::make_shared<amp::FixedLossScaleManager>(1024, true);
    Out o;
    train::Model model(net, ce_loss(), opt, {}, nullptr, amp, scale);
    model.train(1, data::TensorDataset({x, y}, {"x", "y"}).batch(8),
                {train::LambdaCallback(
                    {.on_step_end = [&](train::RunContext& c) { o.losses.push_back(c.loss); }})});
    if (pp > 1 && sharded) {
      o.params = model.gather_parameters();
    } else {
      for (auto& [name, t] : net->parameters_and_buffers())
        o.params.emplace_back(name, sharded ? parallel::gather_whole(t) : t);
    }
    parallel::reset_auto_parallel_context();
    return o;
  };
  struct Case {
    int64_t pp;
    std::string amp;
    int64_t k;
    double loss_tol, param_tol;  // absolute; relative to the tensor's largest magnitude
  };
  for (const Case& c : std::vector<Case>{{1, "O2", 1, 1e-3, 5e-3},
                                         {1, "O0", 2, 1e-5, 1e-5},
                                         {2, "O2", 1, 1e-3, 5e-3},
                                         {2, "O2", 2, 1e-3, 5e-3},
                                         {2, "O0", 2, 1e-5, 1e-5}}) {
    SCOPED_TRACE("pp=" + std::to_string(c.pp) + " " + c.amp + " k=" + std::to_string(c.k));
    const Out one = run(false, c.pp, c.amp, c.k), cut = run(true, c.pp, c.amp, c.k);
    ASSERT_EQ(cut.losses.size(), one.losses.size());
    double dl = 0, dw = 0;
    for (size_t i = 0; i < one.losses.size(); ++i)
      dl = std::max(dl, std::abs(cut.losses[i] - one.losses[i]));
    for (const auto& [name, t] : cut.params)
      for (const auto& [n1, t1] : one.params)
        if (n1 == name) {
          const auto u = t.to_vector<float>(), v = t1.to_vector<float>();
          double d = 0, m = 1e-12;
          for (size_t i = 0; i < u.size(); ++i)
            d = std::max(d, double(std::abs(u[i] - v[i]))), m = std::max(m, double(std::abs(v[i])));
          dw = std::max(dw, d / m);
        }
    Tensor worst = scalar_tensor(dw, kFloat64).contiguous().clone();
    parallel::world()->all_reduce(worst, parallel::ReduceOp::Max);
    if (parallel::get_rank() == 0)
      std::printf(
          "[hybrid] LeNet-5 %s, amp %s, gradient accumulation %lld, 8 batches of 8: max abs loss "
          "difference to one process %.3g, parameters (largest difference over largest magnitude) "
          "%.3g\n",
          c.pp > 1 ? "pp=2 x mp=2" : "dp=2 x mp=2", c.amp.c_str(), (long long)c.k, dl,
          worst.item<double>());
    EXPECT_LE(dl, c.loss_tol);
    EXPECT_LE(worst.item<double>(), c.param_tol);
  }
}
