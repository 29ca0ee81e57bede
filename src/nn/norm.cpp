// BatchNorm1d / BatchNorm2d, LayerNorm and GroupNorm (spore/nn/norm.h). BatchNorm runs the 4-d
// primitives (batch_norm_train / batch_norm_infer) on (N, C) and (N, C, L) inputs by viewing them
// as (N, C, 1, 1) and (N, C, L, 1); the moving statistics are updated in place under NoGradGuard.
#include "spore/nn/norm.h"

#include "nn/util.h"
#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/parallel/sharding.h"

namespace spore::nn {

using detail::fmt;
using detail::fmt_bool;

namespace {
Initializer or_default(const Initializer& i, const char* name) {
  return i.is_default() ? Initializer(name) : i;
}
}  // namespace

BatchNorm::BatchNorm(std::string name, int64_t num_features, BatchNormOptions opt, int64_t min_rank,
                     int64_t max_rank)
    : num_features_(num_features), min_rank_(min_rank), max_rank_(max_rank), opt_(std::move(opt)) {
  set_cls_name(name);
  SPORE_CHECK(num_features_ > 0, "[", name, "] num_features must be positive, got ", num_features_);
  SPORE_CHECK(opt_.momentum >= 0 && opt_.momentum <= 1, "[", name,
              "] momentum must be in [0, 1] (MindSpore convention: moving = momentum * moving + "
              "(1 - momentum) * batch), got ",
              fmt(opt_.momentum));
  SPORE_CHECK(opt_.eps > 0, "[", name, "] eps must be positive, got ", fmt(opt_.eps));
  const Shape c{num_features_};
  register_parameter("gamma", or_default(opt_.gamma_init, "ones").make(c, opt_.dtype), opt_.affine);
  register_parameter("beta", or_default(opt_.beta_init, "zeros").make(c, opt_.dtype), opt_.affine);
  register_buffer("moving_mean", or_default(opt_.moving_mean_init, "zeros").make(c, opt_.dtype));
  register_buffer("moving_variance", or_default(opt_.moving_var_init, "ones").make(c, opt_.dtype));
}

Tensor BatchNorm::construct(const Tensor& x) {
  const std::string ranks = min_rank_ == 4 ? "(N, C, H, W)" : "(N, C) or (N, C, L)";
  SPORE_CHECK(x.dim() >= min_rank_ && x.dim() <= max_rank_ && x.size(1) == num_features_, "[",
              cls_name(), "] expected input ", ranks, " with ", num_features_,
              " channels, got shape ", shape_str(x.shape()));
  const Tensor x4 = x.dim() == 2   ? x.reshape({x.size(0), x.size(1), 1, 1})
                    : x.dim() == 3 ? x.reshape({x.size(0), x.size(1), x.size(2), 1})
                                   : x;
  const bool use_batch = opt_.use_batch_statistics.value_or(training());
  Tensor y;
  if (use_batch) {
    SPORE_CHECK(x.numel() / num_features_ > 1, "[", cls_name(),
                "] batch statistics need more than one value per channel, got input shape ",
                shape_str(x.shape()));
    auto [out, batch_mean, batch_var] = batch_norm_train(x4, gamma(), beta(), opt_.eps);
    y = out;
    NoGradGuard no_grad;
    const double m = opt_.momentum;
    Tensor& mm = moving_mean();
    Tensor& mv = moving_variance();
    assign(mm, mm * m + stop_gradient(batch_mean) * (1 - m));
    assign(mv, mv * m + stop_gradient(batch_var) * (1 - m));
  } else {
    y = batch_norm_infer(x4, gamma(), beta(), moving_mean(), moving_variance(), opt_.eps);
  }
  return x.dim() == 4 ? y : y.reshape(x.shape());
}

std::string BatchNorm::extend_repr() const {
  return "num_features=" + std::to_string(num_features_) + ", eps=" + fmt(opt_.eps) +
         ", momentum=" + fmt(opt_.momentum) + ", affine=" + fmt_bool(opt_.affine) +
         ", use_batch_statistics=" +
         (opt_.use_batch_statistics ? fmt_bool(*opt_.use_batch_statistics) : "None");
}

// ---- LayerNorm ----------------------------------------------------------------------------------
LayerNorm::LayerNorm(Shape normalized_shape, LayerNormOptions opt)
    : normalized_shape_(std::move(normalized_shape)), opt_(std::move(opt)) {
  set_cls_name("LayerNorm");
  SPORE_CHECK(!normalized_shape_.empty(), "[LayerNorm] normalized_shape must not be empty");
  for (int64_t d : normalized_shape_)
    SPORE_CHECK(d > 0, "[LayerNorm] normalized_shape must be positive, got ",
                shape_str(normalized_shape_));
  SPORE_CHECK(opt_.epsilon > 0, "[LayerNorm] epsilon must be positive, got ", fmt(opt_.epsilon));
  register_parameter("gamma",
                     or_default(opt_.gamma_init, "ones").make(normalized_shape_, opt_.dtype));
  register_parameter("beta",
                     or_default(opt_.beta_init, "zeros").make(normalized_shape_, opt_.dtype));
}

Tensor LayerNorm::construct(const Tensor& x) {
  const int64_t r = x.dim();
  const int64_t bna = opt_.begin_norm_axis < 0 ? opt_.begin_norm_axis + r : opt_.begin_norm_axis;
  const int64_t bpa =
      opt_.begin_params_axis < 0 ? opt_.begin_params_axis + r : opt_.begin_params_axis;
  SPORE_CHECK(bna >= 0 && bna < r && bpa >= 0 && bpa < r, "[LayerNorm] begin_norm_axis (",
              opt_.begin_norm_axis, ") and begin_params_axis (", opt_.begin_params_axis,
              ") must be valid axes of the input, got shape ", shape_str(x.shape()));
  Shape trailing(x.shape().begin() + bpa, x.shape().end());
  // A sharded input (semi_auto_parallel) may hold a piece of the normalized dims: check the whole
  // (the engine gathers them before normalising).
  const parallel::Layout cut = parallel::layout_of(x);
  if (int64_t(cut.dims.size()) == r)
    for (size_t i = 0; i < trailing.size(); ++i) trailing[i] *= cut.dims[size_t(bpa) + i].parts;
  SPORE_CHECK(trailing == normalized_shape_, "[LayerNorm] expected input whose dims from axis ",
              bpa, " are ", shape_str(normalized_shape_), ", got shape ", shape_str(x.shape()));
  const int64_t nd = r - bna;
  if (bna == bpa) return layer_norm(x, gamma(), beta(), nd, opt_.epsilon);
  // gamma / beta cover a different set of axes than the normalisation: normalise, then apply them
  // by broadcasting over the trailing axes.
  const Shape norm_shape(x.shape().begin() + bna, x.shape().end());
  Tensor y =
      layer_norm(x, ones(norm_shape, x.dtype()), zeros(norm_shape, x.dtype()), nd, opt_.epsilon);
  return y * gamma() + beta();
}

std::string LayerNorm::extend_repr() const {
  return "normalized_shape=" + shape_str(normalized_shape_) +
         ", begin_norm_axis=" + std::to_string(opt_.begin_norm_axis) +
         ", begin_params_axis=" + std::to_string(opt_.begin_params_axis) +
         ", epsilon=" + fmt(opt_.epsilon);
}

// ---- GroupNorm ----------------------------------------------------------------------------------
GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions opt)
    : groups_(num_groups), channels_(num_channels), opt_(std::move(opt)) {
  set_cls_name("GroupNorm");
  SPORE_CHECK(groups_ >= 1 && channels_ >= 1 && channels_ % groups_ == 0,
              "[GroupNorm] num_channels (", channels_,
              ") must be a positive multiple of num_groups (", groups_, ")");
  SPORE_CHECK(opt_.eps > 0, "[GroupNorm] eps must be positive, got ", fmt(opt_.eps));
  const Shape c{channels_};
  register_parameter("gamma", or_default(opt_.gamma_init, "ones").make(c, opt_.dtype), opt_.affine);
  register_parameter("beta", or_default(opt_.beta_init, "zeros").make(c, opt_.dtype), opt_.affine);
}

Tensor GroupNorm::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() >= 2 && x.size(1) == channels_, "[GroupNorm] expected input (N, C, *) with ",
              channels_, " channels, got shape ", shape_str(x.shape()));
  // (N, C, *) as (N, G, C/G * prod(*)): one layer_norm row per group, then the per-channel affine.
  const Tensor xg = x.reshape({x.size(0), groups_, -1});
  const Shape row{xg.size(2)};
  const Tensor y = layer_norm(xg, ones(row, x.dtype(), x.device()),
                              zeros(row, x.dtype(), x.device()), 1, opt_.eps)
                       .reshape(x.shape());
  Shape cs(size_t(x.dim()), 1);
  cs[1] = channels_;
  return y * gamma().reshape(cs) + beta().reshape(cs);
}

std::string GroupNorm::extend_repr() const {
  return "num_groups=" + std::to_string(groups_) + ", num_channels=" + std::to_string(channels_) +
         ", eps=" + fmt(opt_.eps) + ", affine=" + fmt_bool(opt_.affine);
}

}  // namespace spore::nn
