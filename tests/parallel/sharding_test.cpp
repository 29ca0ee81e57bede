// Operator-level sharding (semi_auto_parallel): the layout arithmetic; every layout transition
// (values and gradients against the whole tensor); Dense row parallel with its all-reduce and its
// reduce-scatter; and the transformer showcase trained 20 steps sharded (mp alone, dp alone through
// dataset_strategy, dp x mp) against one process on the whole batch, in PyNative and Graph mode,
// with the memory each rank holds. Runs as 2 and 4 MPI ranks under ctest (1 rank: layout tests).
#include <gtest/gtest.h>

#include <cmath>

#include <unistd.h>
#include <filesystem>
#include "models/lenet.h"
#include "models/transformer.h"
#include "spore/data/dataset.h"
#include "spore/io/checkpoint.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"
#include "spore/spore.h"
#include "spore/train/callbacks.h"
#include "spore/train/model.h"
#include "spore/train/wrappers.h"

using namespace spore;
using parallel::DimSplit;
using parallel::Layout;

namespace {

double max_rel(const Tensor& a, const Tensor& b) {
  const auto x = a.contiguous().to_vector<double>(), y = b.contiguous().to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double scale = 1e-12, err = 0;
  for (size_t i = 0; i < x.size(); ++i) scale = std::max(scale, std::abs(y[i]));
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) err = std::max(err, std::abs(x[i] - y[i]));
  return err / scale;
}

int ranks() {
  if (parallel::launcher_rank_size().second > 1) parallel::init("mpi");
  return parallel::get_group_size();
}

struct SemiAuto {
  explicit SemiAuto(std::vector<std::vector<int64_t>> dataset = {}, bool full_batch = true) {
    parallel::set_auto_parallel_context({.parallel_mode = parallel::ParallelMode::SemiAutoParallel,
                                         .dataset_strategy = std::move(dataset),
                                         .full_batch = full_batch});
  }
  ~SemiAuto() { parallel::reset_auto_parallel_context(); }
};

}  // namespace

TEST(Sharding, StrategiesGiveLayouts) {
  // 4 ranks, (2, 2): dim 0 over rank digit 2 (stride 2), dim 1 over digit 1 (stride 1)
  Layout l = parallel::layout_from_strategy({2, 2}, 4);
  EXPECT_EQ(l.str(), "[2@2, 2@1]");
  EXPECT_EQ(l.piece(0, 3), 1);
  EXPECT_EQ(l.piece(1, 2), 0);
  // fewer pieces than ranks: the repeat is the fastest digit
  EXPECT_EQ(parallel::layout_from_strategy({2, 1}, 4).str(), "[2@2, 1]");
  // Dense ((dp, 1), (mp, 1)) on 2 x 2: x rows over dp, weight rows (outputs) over mp
  auto d = parallel::dense_layouts({{2, 1}, {2, 1}}, 4);
  EXPECT_EQ(d.x.str(), "[2@2, 1]");
  EXPECT_EQ(d.weight.str(), "[2@1, 1]");
  EXPECT_EQ(d.out.str(), "[2@2, 2@1]");
  auto r = parallel::dense_layouts({{2, 2}, {1, 2}}, 4);  // row parallel: the contraction over mp
  EXPECT_EQ(r.x.str(), "[2@2, 2@1]");
  EXPECT_EQ(r.weight.str(), "[1, 2@1]");
  try {
    parallel::layout_from_strategy({3, 1}, 4);
    FAIL() << "a strategy of 3 pieces on 4 ranks must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide device_num 4"), std::string::npos)
        << e.what();
  }
}

// Every transition between two layouts: the moved piece is the right slice of the whole tensor, and
// the gradient of sum(moved * w) with respect to the whole input is w (through the backward
// collectives).
TEST(Sharding, EveryLayoutTransitionMovesValuesAndGradients) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks (ctest parallel_mpi_np2 / np4)";
  const SemiAuto ctx;
  set_seed(5);
  const Tensor X = randn({8, 12}), W = randn({8, 12});
  const DimSplit all{1, n}, hi{n / 2, 2};
  struct Case {
    const char* name;
    Layout from, to;
  };
  const std::vector<Case> cases = {
      {"whole -> cut (slice)", Layout::whole(2), Layout{{all, {}}}},
      {"cut -> whole (all_gather)", Layout{{all, {}}}, Layout::whole(2)},
      {"cut dim 0 -> cut dim 1 (all_to_all)", Layout{{all, {}}}, Layout{{{}, all}}},
      {"cut dim 1 -> cut dim 0 (all_to_all)", Layout{{{}, all}}, Layout{{all, {}}}},
      {"cut over other ranks (gather + slice)", Layout{{hi, {}}}, Layout{{{}, DimSplit{1, 2}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (n == 2 && std::string(c.name).find("other ranks") != std::string::npos)
      continue;  // same digits
    Tensor x = X.clone().set_requires_grad(true);
    const Tensor piece = parallel::distribute(x, c.from);
    const Tensor moved = parallel::redistribute(piece, c.to);
    EXPECT_EQ(parallel::layout_of(moved), c.to);
    // the expected piece: slice the whole tensor by hand
    Tensor want = X;
    for (size_t d = 0; d < 2; ++d)
      if (c.to.dims[d].cut()) {
        const int64_t len = X.size(int64_t(d)) / c.to.dims[d].parts,
                      q = c.to.piece(d, parallel::get_rank());
        want = want.slice(int64_t(d), q * len, (q + 1) * len);
      }
    EXPECT_EQ(max_rel(moved, want), 0.0);
    const Tensor loss = parallel::gather_whole(moved * parallel::distribute(W, c.to)).sum();
    loss.backward();
    EXPECT_LT(max_rel(x.grad(), W), 1e-6);
  }
}

// Row-parallel Dense (contraction cut): partial products all-reduced, or, with out_strategy,
// reduce-scattered over the rows; values and gradients equal the unsharded layer.
TEST(Sharding, RowParallelDenseAllReducesOrReduceScatters) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  for (bool scatter : {false, true}) {
    SCOPED_TRACE(scatter ? "reduce_scatter" : "all_reduce");
    set_seed(9);
    nn::Dense ref(16, 6);
    const Tensor x0 = randn({8, 16});
    Tensor xr = x0.clone().set_requires_grad(true);
    {
      const Tensor y = ref(xr);
      (y * y).sum().backward();
    }
    const SemiAuto ctx({{1, 1}});
    set_seed(9);
    auto dense = std::make_shared<nn::Dense>(16, 6);
    dense->shard({{1, n}, {1, n}}, scatter ? parallel::Strategy{{n, 1}} : parallel::Strategy{});
    EXPECT_EQ(dense->weight().shape(), (Shape{6, 16 / n}));
    struct Sq : nn::Cell {
      std::shared_ptr<nn::Dense> d;
      explicit Sq(std::shared_ptr<nn::Dense> dd) : d(std::move(dd)) { register_cell("d", d); }
      Tensor construct(const Tensor& x) override {
        const Tensor y = (*d)(x);
        return (y * y).sum();
      }
    };
    parallel::ShardedCell cell(std::make_shared<Sq>(dense));
    parallel::clear_redistribution_log();
    Tensor xs = x0.clone().set_requires_grad(true);
    const Tensor loss = cell(xs);
    loss.backward();
    {
      const Tensor y = ref(x0);
      EXPECT_LT(max_rel(loss, (y * y).sum()), 1e-6);
    }
    EXPECT_LT(max_rel(xs.grad(), xr.grad()), 1e-5);
    const Tensor gw =
        parallel::mark_piece(dense->weight().grad(), parallel::layout_of(dense->weight()));
    EXPECT_LT(max_rel(parallel::gather_whole(gw), ref.weight().grad()), 1e-5);
    bool found = false;
    for (const std::string& s : parallel::redistribution_log())
      if (s.rfind(scatter ? "reduce_scatter" : "all_reduce", 0) == 0) found = true;
    EXPECT_TRUE(found) << "the log should show the " << (scatter ? "reduce-scatter" : "all-reduce");
  }
}

namespace {

struct RunResult {
  std::vector<double> losses;
  std::vector<Tensor> params;  // whole, after training
  int64_t state_bytes = 0;     // this rank's parameter + optimizer bytes
};

// 20 Momentum steps of the transformer on a global batch of 16. dp x mp > 1: sharded (semi_auto).
RunResult train_transformer(int64_t dp, int64_t mp, Mode mode,
                            const models::TransformerOptions& o) {
  set_context({.mode = mode});
  std::optional<SemiAuto> ctx;
  if (dp * mp > 1) ctx.emplace(std::vector<std::vector<int64_t>>{{dp, 1}, {dp}});
  set_seed(21);
  auto net = std::make_shared<models::TransformerClassifier>(o);
  if (dp * mp > 1) net->shard(dp, mp);
  // Momentum: its update is linear in the gradient, so the parameters can be compared tightly too
  // (Adam divides near-zero gradients by their own size and magnifies rounding differences).
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.02, 0.9);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  nn::CellPtr body = std::make_shared<train::WithLossCell>(net, loss);
  if (dp * mp > 1) body = std::make_shared<parallel::ShardedCell>(body);
  train::TrainOneStepCell step(body, opt);
  RunResult r;
  for (int s = 0; s < 20; ++s) {
    auto [ids, labels] = models::make_token_task(16, o, 100 + uint64_t(s));
    r.losses.push_back(step(ids, labels).item<double>());
  }
  for (const Tensor& p : net->trainable_params()) {
    r.state_bytes += int64_t(p.nbytes());
    r.params.push_back(dp * mp > 1 ? parallel::gather_whole(p) : p);
  }
  r.state_bytes += int64_t(parallel::optimizer_state_bytes(*opt));
  set_context({.mode = Mode::PyNative});
  return r;
}

void expect_equal_runs(const RunResult& a, const RunResult& b) {
  double worst = 0;
  for (size_t s = 0; s < a.losses.size(); ++s)
    worst = std::max(worst, std::abs(a.losses[s] - b.losses[s]) / std::abs(b.losses[s]));
  EXPECT_LT(worst, 1e-5) << "largest relative loss difference over 20 steps";
  double pw = 0;
  for (size_t i = 0; i < a.params.size(); ++i) pw = std::max(pw, max_rel(a.params[i], b.params[i]));
  EXPECT_LT(pw, 1e-5) << "largest relative parameter difference after 20 steps";
  if (parallel::get_rank() == 0)
    std::printf("[sharding] losses %.6f -> %.6f, max rel loss diff %.3g, max rel param diff %.3g\n",
                a.losses.front(), a.losses.back(), worst, pw);
}

}  // namespace

// Each dimension alone and combined, both modes: equal to one process on the whole batch.
TEST(Sharding, TransformerShardedEqualsOneProcess) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  const models::TransformerOptions o{
      .vocab = 32, .seq = 8, .dim = 32, .heads = 4, .layers = 2, .classes = 10};
  std::vector<std::pair<int64_t, int64_t>> meshes = {
      {1, n}, {n, 1}};                   // operator sharding alone, data alone
  if (n == 4) meshes.push_back({2, 2});  // dp x mp
  for (Mode mode : {Mode::PyNative, Mode::Graph}) {
    const RunResult ref = train_transformer(1, 1, mode, o);
    for (auto [dp, mp] : meshes) {
      SCOPED_TRACE("dp=" + std::to_string(dp) + " mp=" + std::to_string(mp) +
                   (mode == Mode::Graph ? " graph" : " pynative"));
      expect_equal_runs(train_transformer(dp, mp, mode, o), ref);
    }
  }
}

// The redistribution report (what the IR dump shows as shard_* nodes): for the transformer on the
// largest mesh, the Megatron pattern and no op falling back to whole inputs.
TEST(Sharding, TransformerNeedsNoWholeInputFallback) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  const models::TransformerOptions o{
      .vocab = 32, .seq = 8, .dim = 32, .heads = 4, .layers = 1, .classes = 10};
  parallel::clear_redistribution_log();
  const int64_t dp = n == 4 ? 2 : 1, mp = n / dp;
  train_transformer(dp, mp, Mode::Graph, o);
  const auto log = parallel::redistribution_log();
  bool all_reduce = false, mirror = false;
  for (const std::string& s : log) {
    if (parallel::get_rank() == 0) std::printf("[sharding] %s\n", s.c_str());
    EXPECT_EQ(s.rfind("whole:", 0), std::string::npos) << s;
    all_reduce |= s.rfind("all_reduce", 0) == 0;
    mirror |= s.rfind("mirror", 0) == 0;
  }
  EXPECT_TRUE(all_reduce) << "row-parallel layers sum their partial outputs";
  EXPECT_TRUE(mirror) << "column-parallel inputs all-reduce their gradients";
}

// Memory: with the blocks' Dense layers cut over mp = 2 ranks, each rank's parameters + Momentum
// state are at most 0.55x of one process's (embedding, norms and head stay whole).
TEST(Sharding, OperatorShardingHalvesParameterAndOptimizerBytes) {
  const int n = ranks();
  if (n != 2) GTEST_SKIP() << "the figure is for 2 ranks (ctest parallel_mpi_np2)";
  const models::TransformerOptions o{
      .vocab = 32, .seq = 8, .dim = 128, .heads = 4, .layers = 2, .classes = 10};
  const RunResult one = train_transformer(1, 1, Mode::PyNative, o);
  const RunResult two = train_transformer(1, 2, Mode::PyNative, o);
  const double ratio = double(two.state_bytes) / double(one.state_bytes);
  if (parallel::get_rank() == 0)
    std::printf("[sharding] parameter + optimizer bytes per rank: %lld of %lld = %.3fx\n",
                (long long)two.state_bytes, (long long)one.state_bytes, ratio);
  EXPECT_LE(ratio, 0.55);
  for (double l : two.losses) EXPECT_TRUE(std::isfinite(l));
}

// ModelCheckpoint under semi_auto_parallel: each rank writes its pieces under rank_<r>/ with the
// cut tensors' layouts in the metadata (nothing of another rank's is lost or overwritten).
TEST(Sharding, CheckpointsArePerRankWithLayouts) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  const SemiAuto ctx({{1, 1}, {1}});
  const models::TransformerOptions o{
      .vocab = 32, .seq = 8, .dim = 32, .heads = 4, .layers = 1, .classes = 10};
  set_seed(21);
  auto net = std::make_shared<models::TransformerClassifier>(o);
  net->shard(1, n);
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.02, 0.9);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::Model model(net, loss, opt);
  auto [ids, labels] = models::make_token_task(32, o, 7);
  auto ds = data::TensorDataset({ids, labels}, {"ids", "label"}).batch(16);
  const std::string dir = "/tmp/spore_sharded_ckpt_" + std::to_string(getppid());
  auto ckpt = std::make_shared<train::ModelCheckpoint>(
      "tr", dir, train::CheckpointConfig{.save_checkpoint_epochs = 1});
  model.train(1, ds, {ckpt});
  const std::string mine =
      dir + "/rank_" + std::to_string(parallel::get_rank()) + "/tr-1_2.safetensors";
  const io::Checkpoint c = io::load_checkpoint(mine);
  EXPECT_EQ(c.metadata.at("group_size"), std::to_string(n));
  EXPECT_EQ(c.metadata.at("layout.block0.q.weight"), "[" + std::to_string(n) + "@1, 1]");
  for (const auto& [name, t] : c.tensors)
    if (name == "block0.q.weight") EXPECT_EQ(t.shape(), (Shape{32 / n, 32}));
  parallel::world()->barrier();
  if (parallel::get_rank() == 0) std::filesystem::remove_all(dir);
}

// Convolutions cut the same way: LeNet-5 with conv1 / fc1 cut on their outputs and conv2 / fc2 on
// their inputs (LeNet5::shard), mp alone and dp x mp, 20 steps in Graph mode against one process.
TEST(Sharding, LeNetConvolutionsShardedEqualOneProcess) {
  const int n = ranks();
  if (n < 2) GTEST_SKIP() << "needs 2 or 4 MPI ranks";
  auto run = [&](int64_t dp, int64_t mp) {
    set_context({.mode = Mode::Graph});
    std::optional<SemiAuto> ctx;
    if (dp * mp > 1) ctx.emplace(std::vector<std::vector<int64_t>>{{dp, 1, 1, 1}, {dp}});
    set_seed(4);
    auto net = std::make_shared<models::LeNet5>();
    if (dp * mp > 1) net->shard(dp, mp);
    auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.05, 0.9);
    nn::CellPtr body = std::make_shared<train::WithLossCell>(
        net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
                 nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"}));
    if (dp * mp > 1) body = std::make_shared<parallel::ShardedCell>(body);
    train::TrainOneStepCell step(body, opt);
    RunResult r;
    for (int s = 0; s < 20; ++s) {
      set_seed(50 + uint64_t(s));
      Tensor x = randn({16, 1, 28, 28});
      Tensor y = randint(0, 10, {16}, kInt32);
      r.losses.push_back(step(x, y).item<double>());
    }
    for (const Tensor& p : net->trainable_params())
      r.params.push_back(dp * mp > 1 ? parallel::gather_whole(p) : p);
    set_context({.mode = Mode::PyNative});
    return r;
  };
  const RunResult ref = run(1, 1);
  parallel::clear_redistribution_log();
  for (auto [dp, mp] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {int64_t(n) / 2, 2}}) {
    SCOPED_TRACE("dp=" + std::to_string(dp) + " mp=" + std::to_string(mp));
    expect_equal_runs(run(dp, mp), ref);
  }
  for (const std::string& s : parallel::redistribution_log())
    EXPECT_EQ(s.rfind("whole:", 0), std::string::npos) << s;
}
