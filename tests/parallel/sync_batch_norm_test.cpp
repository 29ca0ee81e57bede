// nn::SyncBatchNorm: N ranks holding rows of one batch (equal or unequal shares) give what one
// process's BatchNorm gives on the whole batch: the outputs, the moving statistics, the gradient of
// the summed loss with respect to each rank's rows and (summed over the ranks) to gamma and beta;
// and data-parallel training of a small convolutional network with SyncBatchNorm equals one
// process on the whole batch. As one process (a group of one) it is BatchNorm.
#include <gtest/gtest.h>

#include <cmath>

#include "spore/autograd.h"
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

// Largest |a - b| over the largest |a|.
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto u = a.to(kFloat64).contiguous().to_vector<double>();
  const auto v = b.to(kFloat64).contiguous().to_vector<double>();
  EXPECT_EQ(u.size(), v.size());
  double d = 0, m = 0;
  for (size_t i = 0; i < u.size() && i < v.size(); ++i)
    d = std::max(d, std::abs(u[i] - v[i])), m = std::max(m, std::abs(u[i]));
  return d / std::max(m, 1e-30);
}

// Rank r's rows [begin, end) of a batch of n: equal shares, or (uneven) rank r gets r + 1 parts.
std::pair<int64_t, int64_t> rows_of(int r, int R, int64_t n, bool uneven) {
  if (!uneven) return {r * n / R, (r + 1) * n / R};
  const int64_t parts = int64_t(R) * (R + 1) / 2;
  int64_t begin = 0;
  for (int q = 0; q < r; ++q) begin += n * (q + 1) / parts;
  const int64_t end = r == R - 1 ? n : begin + n * (r + 1) / parts;
  return {begin, end};
}

// One forward and backward of SyncBatchNorm on this rank's rows against BatchNorm on the whole
// batch; the loss is sum(y * w) over the whole batch (each rank's part summed).
void check_against_one_process(const Shape& shape, bool uneven) {
  auto g = group();
  const int R = g->size(), me = g->rank();
  const int64_t C = shape[1], n = shape[0];
  set_seed(11);
  Tensor x = randn(shape) * 3.0 + 1.5;  // a mean far from 0: the two-pass variance matters
  Tensor w = randn(shape);
  Tensor gamma0 = randn({C}), beta0 = randn({C});
  auto make = [&](auto bn) {
    assign(bn->gamma(), gamma0);
    assign(bn->beta(), beta0);
    bn->set_train(true);
    return bn;
  };
  std::shared_ptr<nn::BatchNorm> ref =
      shape.size() == 4
          ? make(std::make_shared<nn::BatchNorm2d>(C))
          : std::static_pointer_cast<nn::BatchNorm>(make(std::make_shared<nn::BatchNorm1d>(C)));
  auto sync = make(std::make_shared<nn::SyncBatchNorm>(C));
  Tensor xr = x.clone().set_requires_grad(true);
  const Tensor yr = (*ref)(xr);
  const auto gr = autograd::grad((yr * w).sum(), {xr, ref->gamma(), ref->beta()});

  const auto [b, e] = rows_of(me, R, n, uneven);
  Tensor xs = x.slice(0, b, e).contiguous().set_requires_grad(true);
  const Tensor ys = (*sync)(xs);
  const auto gs =
      autograd::grad((ys * w.slice(0, b, e).contiguous()).sum(), {xs, sync->gamma(), sync->beta()});
  // gamma and beta: each rank's gradient is its rows' share; their sum is the whole batch's.
  Tensor dgamma = gs[1].contiguous().clone(), dbeta = gs[2].contiguous().clone();
  g->all_reduce(dgamma, parallel::ReduceOp::Sum);
  g->all_reduce(dbeta, parallel::ReduceOp::Sum);
  const double dy = rel_diff(yr.slice(0, b, e), ys), dx = rel_diff(gr[0].slice(0, b, e), gs[0]),
               dg = rel_diff(gr[1], dgamma), db = rel_diff(gr[2], dbeta),
               dm = rel_diff(ref->moving_mean(), sync->moving_mean()),
               dv = rel_diff(ref->moving_variance(), sync->moving_variance());
  if (me == 0)
    std::printf(
        "SyncBatchNorm %s on %d ranks (%s rows): output %.2g, input grad %.2g, gamma grad %.2g, "
        "beta grad %.2g, moving mean %.2g, moving variance %.2g\n",
        shape_str(shape).c_str(), R, uneven ? "unequal" : "equal", dy, dx, dg, db, dm, dv);
  for (double d : {dy, dx, dg, db, dm, dv}) EXPECT_LE(d, 2e-6);
  // Eval: the moving statistics, as BatchNorm.
  ref->set_train(false);
  sync->set_train(false);
  EXPECT_LE(rel_diff((*ref)(x).slice(0, b, e), (*sync)(x.slice(0, b, e).contiguous())), 1e-6);
}

// conv -> SyncBatchNorm (or, in one process, the same cell on a group of one) -> ReLU -> dense.
std::shared_ptr<train::TrainOneStepCell> conv_bn_net(std::shared_ptr<nn::SequentialCell>& net) {
  set_seed(5);
  net = std::make_shared<nn::SequentialCell>(std::vector<nn::CellPtr>{
      std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.pad_mode = "valid"}),
      std::make_shared<nn::SyncBatchNorm>(4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Dense>(4 * 6 * 6, 3)});
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.1, 0.9);
  return std::make_shared<train::TrainOneStepCell>(std::make_shared<train::WithLossCell>(net, loss),
                                                   opt);
}

}  // namespace

TEST(SyncBatchNorm, EqualsBatchNormOnTheWholeBatch) {
  check_against_one_process({16, 3, 4, 5}, false);
  check_against_one_process({24, 6}, false);
}

TEST(SyncBatchNorm, RanksWithUnequalRowsEqualBatchNormOnTheWholeBatch) {
  if (group()->size() == 1) GTEST_SKIP() << "needs ranks";
  check_against_one_process({20, 3, 2, 2}, true);
}

// Data parallel (each rank B / N rows, the gradients averaged) with SyncBatchNorm against one
// process on the batch of B with BatchNorm's statistics: the same losses for 10 Momentum steps, the
// same parameters and moving statistics.
TEST(SyncBatchNorm, DataParallelTrainingEqualsOneProcess) {
  auto g = group();
  const int R = g->size(), me = g->rank();
  parallel::AutoParallelContext ctx;
  ctx.parallel_mode = parallel::ParallelMode::DataParallel;
  parallel::set_auto_parallel_context(ctx);
  std::shared_ptr<nn::SequentialCell> dp_net, ref_net;
  auto dp = conv_bn_net(dp_net);
  parallel::setup_data_parallel(*dp, dp_net->parameters_and_buffers(), g);
  // The reference: the same network whose SyncBatchNorm reduces over a group of one.
  set_seed(5);
  ref_net = std::make_shared<nn::SequentialCell>(std::vector<nn::CellPtr>{
      std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.pad_mode = "valid"}),
      std::make_shared<nn::SyncBatchNorm>(4, nn::BatchNormOptions{}, parallel::make_local_group()),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Dense>(4 * 6 * 6, 3)});
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto ref = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(ref_net, loss),
      std::make_shared<optim::Momentum>(ref_net->trainable_params(), 0.1, 0.9));
  const int64_t B = 16, per = B / R;
  double worst = 0;
  for (int s = 0; s < 10; ++s) {
    set_seed(300 + uint64_t(s));
    Tensor x = randn({B, 1, 8, 8}) * 2.0 + 0.5;
    Tensor y = randint(0, 3, {B}, kInt32);
    Tensor l = (*dp)(x.slice(0, me * per, (me + 1) * per).contiguous(),
                     y.slice(0, me * per, (me + 1) * per).contiguous())
                   .contiguous()
                   .clone()
                   .reshape({1});
    g->all_reduce(l, parallel::ReduceOp::Mean);
    const double lr = (*ref)(x, y).item<double>(), ld = l.item<double>();
    worst = std::max(worst, std::abs(ld - lr) / std::abs(lr));
  }
  const auto a = dp_net->parameters_and_buffers(), b = ref_net->parameters_and_buffers();
  double params = 0;
  for (size_t i = 0; i < a.size(); ++i)
    params = std::max(params, rel_diff(b[i].second, a[i].second));
  if (me == 0)
    std::printf(
        "SyncBatchNorm data parallel on %d ranks, 10 steps: max relative loss difference %.3g, "
        "parameters and moving statistics %.3g\n",
        R, worst, params);
  EXPECT_LE(worst, 1e-5);
  EXPECT_LE(params, 1e-4);
  parallel::reset_auto_parallel_context();
}
