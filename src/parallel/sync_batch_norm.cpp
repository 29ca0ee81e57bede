// nn::SyncBatchNorm (spore/nn/norm.h): BatchNorm with the statistics of the batch cut over a
// data-parallel group. Written with differentiable ops around one collective op, a sum over the
// group whose gradient is again a sum over the group: rank r's rows enter every rank's loss
// through the shared mean and variance, so the gradient of the sum of the ranks' losses with
// respect to rank r's rows needs every rank's gradient of the statistics.
#include <cstring>
#include <map>
#include <mutex>

#include "nn/util.h"
#include "spore/autograd.h"
#include "spore/custom_op.h"
#include "spore/nn/norm.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"

namespace spore::nn {

namespace {

// The sum over `g`'s ranks as an op: forward all-reduce (sum), backward all-reduce (sum) of the
// gradient. One op per group (its kernel holds the group).
CustomOpHandle group_sum_op(const parallel::GroupPtr& g) {
  static std::mutex mu;
  static std::map<const parallel::Group*, std::pair<parallel::GroupPtr, CustomOpHandle>> ops;
  std::lock_guard lk(mu);
  auto it = ops.find(g.get());
  if (it != ops.end()) return it->second.second;
  CustomOp op;
  op.name = "sync_bn_group_sum_" + std::to_string(ops.size());
  op.num_inputs = 1;
  op.dtypes = {kFloat32, kFloat64};
  op.infer = [](const std::vector<Shape>& s, const std::vector<DType>& t) {
    return std::pair<Shape, DType>{s[0], t[0]};
  };
  parallel::Group* raw = g.get();  // kept alive by the map
  op.cpu_kernel = [raw](const std::vector<Tensor>& in, Tensor& out) {
    const NoGradGuard no_grad;
    const Tensor x = in[0].contiguous();
    std::memcpy(out.data_ptr(), x.data_ptr(), out.nbytes());
    raw->all_reduce(out, parallel::ReduceOp::Sum);
  };
  // Every rank sums the same statistics, so the gradient reaching rank r's summand is the sum of
  // every rank's gradient of the result.
  auto handle = std::make_shared<CustomOpHandle>();
  op.bprop = [handle](const std::vector<Tensor>&, const Tensor&, const Tensor& dout) {
    return std::vector<Tensor>{(*handle)(dout)};
  };
  // A collective: every call must run on every rank (no merging, folding or recomputation).
  op.traits.impure = true;
  op.traits.amp = CustomOpTraits::Amp::kFollow;
  *handle = register_custom_op(std::move(op));
  ops[g.get()] = {g, *handle};
  return *handle;
}

}  // namespace

SyncBatchNorm::SyncBatchNorm(int64_t num_features, BatchNormOptions opt,
                             std::shared_ptr<parallel::Group> process_group)
    : BatchNorm("SyncBatchNorm", num_features, std::move(opt), 2, 4),
      group_(process_group ? std::move(process_group) : parallel::world()) {}

Tensor SyncBatchNorm::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() >= 2 && x.dim() <= 4 && x.size(1) == num_features_, "[", cls_name(),
              "] expected input (N, C), (N, C, L) or (N, C, H, W) with ", num_features_,
              " channels, got shape ", shape_str(x.shape()));
  const bool use_batch = opt_.use_batch_statistics.value_or(training());
  if (!use_batch || group_->size() == 1) return BatchNorm::construct(x);
  SPORE_CHECK(is_floating(x.dtype()) && x.dtype() != kFloat16 && x.dtype() != kBFloat16, "[",
              cls_name(), "] sums the batch statistics over the ranks in float32 or float64; got ",
              dtype_name(x.dtype()), " (keep it in float32 under amp: keep_batchnorm_fp32)");
  // The rows of the whole batch: this rank's count summed over the group (ranks may differ).
  Tensor count = full({1}, double(x.numel() / num_features_), kFloat64);
  group_->all_reduce(count, parallel::ReduceOp::Sum);
  const double n = count.item<double>();
  SPORE_CHECK(n > 1, "[", cls_name(),
              "] batch statistics need more than one value per channel over the group, got ", n);
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
  Shape bshape(size_t(x.dim()), 1);  // (1, C, 1, ...) to broadcast per channel
  bshape[1] = num_features_;
  const CustomOpHandle group_sum = group_sum_op(group_);
  // Two passes, as one process: the mean, then the mean square deviation from it.
  const Tensor mean = group_sum(x.sum(axes)) * (1.0 / n);
  const Tensor centred = x - mean.reshape(bshape);
  const Tensor var = group_sum(square(centred).sum(axes)) * (1.0 / n);  // biased
  const Tensor invstd = rsqrt(var + opt_.eps);
  Tensor y = centred * invstd.reshape(bshape) * gamma().reshape(bshape) + beta().reshape(bshape);
  NoGradGuard no_grad;
  const double m = opt_.momentum;
  Tensor& mm = moving_mean();
  Tensor& mv = moving_variance();
  assign(mm, mm * m + stop_gradient(mean) * (1 - m));
  assign(mv, mv * m + stop_gradient(var) * (n / (n - 1) * (1 - m)));  // unbiased, as BatchNorm
  return y;
}

std::string SyncBatchNorm::extend_repr() const {
  return BatchNorm::extend_repr() + ", group_size=" + std::to_string(group_->size());
}

}  // namespace spore::nn
