// Dense, Conv1d, Conv2d, Conv2dTranspose, Embedding, Flatten, Dropout, Upsample, Pad
// (spore/nn/layers.h). Each checks its input
// against its configuration first, so a mistake is reported in the layer's terms (features,
// channels) rather than as a matmul or conv shape error.
#include "spore/nn/layers.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "nn/util.h"
#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"

namespace spore::nn {

using detail::fmt;
using detail::fmt_bool;

Int2::Int2(std::initializer_list<int64_t> v) {
  SPORE_CHECK(v.size() == 1 || v.size() == 2, "expected an int or a pair (h, w), got ", v.size(),
              " values");
  h = *v.begin();
  w = *(v.end() - 1);
}

Pad4::Pad4(std::initializer_list<int64_t> v) {
  SPORE_CHECK(v.size() == 1 || v.size() == 4,
              "padding must be an int or 4 values (top, bottom, left, right), got ", v.size(),
              " values");
  const int64_t* p = v.begin();
  if (v.size() == 1) {
    top = bottom = left = right = p[0];
  } else {
    top = p[0];
    bottom = p[1];
    left = p[2];
    right = p[3];
  }
}

// ---- Dense --------------------------------------------------------------------------------------
Dense::Dense(int64_t in_channels, int64_t out_channels, DenseOptions opt)
    : in_(in_channels), out_(out_channels), has_bias_(opt.has_bias), activation_(opt.activation) {
  set_cls_name("Dense");
  SPORE_CHECK(in_ > 0 && out_ > 0, "[Dense] in_channels and out_channels must be positive, got ",
              in_, " and ", out_);
  const Initializer w = opt.weight_init.is_default() ? HeUniform(std::sqrt(5.0)) : opt.weight_init;
  register_parameter("weight", w.make({out_, in_}, opt.dtype));  // (out, in)
  if (has_bias_) {
    const Initializer b =
        opt.bias_init.is_default() ? Uniform(1.0 / std::sqrt(double(in_))) : opt.bias_init;
    register_parameter("bias", b.make({out_}, opt.dtype));
  }
  if (!activation_.empty()) {
    act_ = get_activation(activation_);
    register_cell("activation", act_);
  }
}

Tensor Dense::construct(const Tensor& x) {
  // A sharded input (semi_auto_parallel) holds a piece of its last dim: check the whole.
  const int64_t features = x.dim() >= 1 ? x.size(-1) * parallel::layout_of(x).dims.back().parts : 0;
  SPORE_CHECK(x.dim() >= 1 && features == in_, "[Dense] expected input with ", in_,
              " features (last dim), got shape ", shape_str(x.shape()));
  // (..., in) -> (M, in) @ (in, out) -> (..., out)
  Tensor x2 = x.dim() == 2 ? x : x.reshape({-1, x.size(-1)});  // size(-1): in_, or a piece of it
  Tensor y;
  {
    parallel::OpStrategyScope sharded(strategy_ ? &*strategy_ : nullptr);  // shard(), if called
    y = matmul(x2, parameter("weight").t());
  }
  if (has_bias_) y = y + parameter("bias");
  if (x.dim() != 2) {
    Shape s(x.shape().begin(), x.shape().end() - 1);
    s.push_back(y.size(-1));  // out_, or this rank's piece of it (column parallel)
    y = y.reshape(s);
  }
  if (act_) y = (*act_)(y);
  return y;
}

Dense& Dense::shard(const parallel::Strategy& in_strategy, const parallel::Strategy& out_strategy) {
  if (!parallel::semi_auto_active()) return *this;
  const int64_t n = parallel::sharding_group()->size();
  const parallel::DenseLayouts l =
      parallel::dense_layouts(in_strategy, n);  // n: the sharding group (a pipeline stage's ranks)
  parallel::shard_parameter(parameter("weight"), l.weight);
  if (has_bias_) parallel::shard_parameter(parameter("bias"), l.bias);
  strategy_ = parallel::OpStrategy{parallel::OpStrategy::Op::Matmul, l.x, std::nullopt};
  in_strategy_ = in_strategy;
  if (!out_strategy.empty()) {
    SPORE_CHECK(out_strategy.size() == 1 && out_strategy[0].size() == 2,
                "[Dense.shard] out_strategy is ((m, n),) "
                "for the output (M, N); got ",
                out_strategy.size(), " entries");
    // Same device matrix (m, k, n). The output's dim 0 may take the contraction's ranks (k) when
    // the input's rows are whole (m = 1): the partial sums are reduce-scattered over them.
    const int64_t m = in_strategy[0][0], k = in_strategy[0][1], mo = out_strategy[0][0];
    SPORE_CHECK(out_strategy[0][1] == in_strategy[1][0], "[Dense.shard] out_strategy's n (",
                out_strategy[0][1], ") must equal the weight's n (", in_strategy[1][0], ")");
    SPORE_CHECK(
        mo == m || (m == 1 && mo == k), "[Dense.shard] out_strategy ((", mo, ", ",
        out_strategy[0][1], "),) is not supported for in_strategy m = ", m, ", k = ", k,
        "; use m' = m (no reduce-scatter) or, "
        "with m = 1, m' = k (reduce-scatter the partial sums over the contraction's ranks)");
    strategy_->output = parallel::Layout{
        {mo == m ? l.out.dims[0] : l.x.dims[1], l.out.dims[1]}};  // x's dim 1: the k cut
  }
  return *this;
}

// Column (the outputs over mp), row (the contraction over mp, partial sums added) and a whole
// weight; the batch over dp in each. Only the cuts the sizes allow.
std::vector<parallel::Strategy> Dense::strategy_candidates(int64_t dp, int64_t mp) const {
  std::vector<parallel::Strategy> c;
  if (mp > 1 && out_ % mp == 0) c.push_back({{dp, 1}, {mp, 1}});
  if (mp > 1 && in_ % mp == 0) c.push_back({{dp, mp}, {1, mp}});
  c.push_back({{dp, 1}, {1, 1}});
  return c;
}

void Dense::clear_strategy() {
  strategy_.reset();
  in_strategy_.clear();
}

std::vector<parallel::Strategy> Conv2d::strategy_candidates(int64_t dp, int64_t mp) const {
  std::vector<parallel::Strategy> c;
  if (opt_.group != 1) return c;  // grouped convolutions have no strategy yet
  if (mp > 1 && out_ % mp == 0) c.push_back({{dp, 1, 1, 1}, {mp, 1, 1, 1}});
  if (mp > 1 && in_ % mp == 0) c.push_back({{dp, mp, 1, 1}, {1, mp, 1, 1}});
  c.push_back({{dp, 1, 1, 1}, {1, 1, 1, 1}});
  return c;
}

void Conv2d::clear_strategy() {
  strategy_.reset();
  in_strategy_.clear();
}

Conv2d& Conv2d::shard(const parallel::Strategy& st) {
  if (!parallel::semi_auto_active()) return *this;
  SPORE_CHECK(opt_.group == 1, "[Conv2d.shard] grouped convolutions (group ", opt_.group,
              ") cannot be sharded yet");
  SPORE_CHECK(st.size() == 2 && st[0].size() == 4 && st[1].size() == 4,
              "[Conv2d.shard] expected a strategy ((n, c_in, 1, 1), (c_out, c_in, 1, 1)) for the "
              "input (N, C, H, W) "
              "and the weight (O, C, kh, kw), got ",
              st.size(), " entries");
  SPORE_CHECK(st[0][2] == 1 && st[0][3] == 1 && st[1][2] == 1 && st[1][3] == 1,
              "[Conv2d.shard] the spatial dims cannot be cut; use 1 for H, W, kh and kw");
  SPORE_CHECK(st[0][1] == st[1][1], "[Conv2d.shard] the input's c_in (", st[0][1],
              ") and the weight's (", st[1][1], ") must be equal: both cut the contraction");
  // device matrix (n, c_in, c_out), as a Dense's (m, k, n)
  const parallel::DenseLayouts l = parallel::dense_layouts(
      {{st[0][0], st[0][1]}, {st[1][0], st[1][1]}}, parallel::sharding_group()->size());
  const parallel::DimSplit none{};
  parallel::shard_parameter(parameter("weight"),
                            parallel::Layout{{l.weight.dims[0], l.weight.dims[1], none, none}});
  if (opt_.has_bias) parallel::shard_parameter(parameter("bias"), l.bias);
  strategy_ =
      parallel::OpStrategy{parallel::OpStrategy::Op::Conv2d,
                           parallel::Layout{{l.x.dims[0], l.x.dims[1], none, none}}, std::nullopt};
  in_strategy_ = st;
  return *this;
}

std::string Dense::extend_repr() const {
  std::string s = "input_channels=" + std::to_string(in_) +
                  ", output_channels=" + std::to_string(out_) + ", has_bias=" + fmt_bool(has_bias_);
  if (act_) s += ", activation=" + act_->str();
  return s;
}

// ---- Conv2d -------------------------------------------------------------------------------------
Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, Conv2dOptions opt)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), opt_(std::move(opt)) {
  set_cls_name("Conv2d");
  SPORE_CHECK(in_ > 0 && out_ > 0, "[Conv2d] in_channels and out_channels must be positive, got ",
              in_, " and ", out_);
  SPORE_CHECK(opt_.group >= 1 && in_ % opt_.group == 0 && out_ % opt_.group == 0,
              "[Conv2d] in_channels (", in_, ") and out_channels (", out_,
              ") must both be divisible by group (", opt_.group, ")");
  SPORE_CHECK(kernel_.h >= 1 && kernel_.w >= 1 && opt_.stride.h >= 1 && opt_.stride.w >= 1 &&
                  opt_.dilation.h >= 1 && opt_.dilation.w >= 1,
              "[Conv2d] kernel_size, stride and dilation must be >= 1, got kernel_size (",
              kernel_.h, ", ", kernel_.w, "), stride (", opt_.stride.h, ", ", opt_.stride.w,
              "), dilation (", opt_.dilation.h, ", ", opt_.dilation.w, ")");
  SPORE_CHECK(opt_.pad_mode == "same" || opt_.pad_mode == "valid" || opt_.pad_mode == "pad",
              "[Conv2d] pad_mode must be 'same', 'valid' or 'pad', got '", opt_.pad_mode, "'");
  SPORE_CHECK(opt_.pad_mode == "pad" || opt_.padding.zero(),
              "[Conv2d] padding must be 0 when pad_mode is '", opt_.pad_mode, "', got ",
              shape_str(opt_.padding.vec()), "; use pad_mode \"pad\"");
  SPORE_CHECK(opt_.padding.top >= 0 && opt_.padding.bottom >= 0 && opt_.padding.left >= 0 &&
                  opt_.padding.right >= 0,
              "[Conv2d] padding must be non-negative, got ", shape_str(opt_.padding.vec()));
  const Shape wshape{out_, in_ / opt_.group, kernel_.h, kernel_.w};  // (out, in/group, kh, kw)
  const Initializer w =
      opt_.weight_init.is_default() ? HeUniform(std::sqrt(5.0)) : opt_.weight_init;
  register_parameter("weight", w.make(wshape, opt_.dtype));
  if (opt_.has_bias) {
    const int64_t fan_in = calculate_fan_in_and_fan_out(wshape).first;
    const Initializer b =
        opt_.bias_init.is_default() ? Uniform(1.0 / std::sqrt(double(fan_in))) : opt_.bias_init;
    register_parameter("bias", b.make({out_}, opt_.dtype));
  }
}

std::vector<int64_t> Conv2d::pads_for(int64_t h, int64_t w) const {
  if (opt_.pad_mode == "pad") return opt_.padding.vec();
  if (opt_.pad_mode == "valid") return {0, 0, 0, 0};
  // "same" as MindSpore / TensorFlow: output ceil(H / s); the odd pixel goes to the bottom/right.
  auto same = [](int64_t in, int64_t k, int64_t s, int64_t d) {
    const int64_t out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
    return std::pair<int64_t, int64_t>{total / 2, total - total / 2};
  };
  auto [t, b] = same(h, kernel_.h, opt_.stride.h, opt_.dilation.h);
  auto [l, r] = same(w, kernel_.w, opt_.stride.w, opt_.dilation.w);
  return {t, b, l, r};
}

Tensor Conv2d::construct(const Tensor& x) {
  // A sharded input (semi_auto_parallel) may hold a piece of the channels: check the whole.
  const int64_t channels = x.dim() == 4 ? x.size(1) * parallel::layout_of(x).dims[1].parts : 0;
  SPORE_CHECK(x.dim() == 4 && channels == in_, "[Conv2d] expected input (N, C, H, W) with ", in_,
              " channels, got shape ", shape_str(x.shape()));
  parallel::OpStrategyScope sharded(strategy_ ? &*strategy_ : nullptr);  // shard(), if called
  spore::Conv2dOptions o;
  o.stride = opt_.stride.vec();
  o.padding = pads_for(x.size(2), x.size(3));
  o.dilation = opt_.dilation.vec();
  o.groups = opt_.group;
  const int64_t eff_h = (kernel_.h - 1) * opt_.dilation.h + 1,
                eff_w = (kernel_.w - 1) * opt_.dilation.w + 1;
  SPORE_CHECK(x.size(2) + o.padding[0] + o.padding[1] >= eff_h &&
                  x.size(3) + o.padding[2] + o.padding[3] >= eff_w,
              "[Conv2d] input ", shape_str(x.shape()), " with padding ", shape_str(o.padding),
              " is smaller than the (dilated) kernel (", eff_h, ", ", eff_w, ")");
  if (opt_.has_bias) return conv2d(x, parameter("weight"), parameter("bias"), o);
  return conv2d(x, parameter("weight"), o);
}

std::string Conv2d::extend_repr() const {
  return "input_channels=" + std::to_string(in_) + ", output_channels=" + std::to_string(out_) +
         ", kernel_size=" + shape_str(kernel_.vec()) + ", stride=" + shape_str(opt_.stride.vec()) +
         ", pad_mode=" + opt_.pad_mode + ", padding=" + shape_str(opt_.padding.vec()) +
         ", dilation=" + shape_str(opt_.dilation.vec()) + ", group=" + std::to_string(opt_.group) +
         ", has_bias=" + fmt_bool(opt_.has_bias) + ", format=NCHW";
}

namespace {
// MindSpore's / TensorFlow's "same": output ceil(in / s); the odd pixel of padding goes last.
std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t k, int64_t s, int64_t d) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
  return {total / 2, total - total / 2};
}
Initializer default_bias(const Initializer& given, const Shape& wshape) {
  if (!given.is_default()) return given;
  return Uniform(1.0 / std::sqrt(double(calculate_fan_in_and_fan_out(wshape).first)));
}
}  // namespace

// ---- Conv1d -------------------------------------------------------------------------------------
Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions opt)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), opt_(std::move(opt)) {
  set_cls_name("Conv1d");
  SPORE_CHECK(in_ > 0 && out_ > 0, "[Conv1d] in_channels and out_channels must be positive, got ",
              in_, " and ", out_);
  SPORE_CHECK(opt_.group >= 1 && in_ % opt_.group == 0 && out_ % opt_.group == 0,
              "[Conv1d] group (", opt_.group, ") must divide in_channels (", in_,
              ") and out_channels (", out_, ")");
  SPORE_CHECK(kernel_ >= 1 && opt_.stride >= 1 && opt_.dilation >= 1,
              "[Conv1d] kernel_size, stride and dilation must be >= 1, got ", kernel_, ", ",
              opt_.stride, " and ", opt_.dilation);
  SPORE_CHECK(opt_.pad_mode == "same" || opt_.pad_mode == "valid" || opt_.pad_mode == "pad",
              "[Conv1d] pad_mode must be 'same', 'valid' or 'pad', got '", opt_.pad_mode, "'");
  SPORE_CHECK(opt_.padding.size() == 1 || opt_.padding.size() == 2,
              "[Conv1d] padding must be one value or (left, right), got ", shape_str(opt_.padding));
  pad_left_ = opt_.padding.front();
  pad_right_ = opt_.padding.back();
  SPORE_CHECK(pad_left_ >= 0 && pad_right_ >= 0, "[Conv1d] padding must be non-negative, got ",
              shape_str(opt_.padding));
  SPORE_CHECK(opt_.pad_mode == "pad" || (pad_left_ == 0 && pad_right_ == 0),
              "[Conv1d] padding must be 0 when pad_mode is '", opt_.pad_mode, "', got ",
              shape_str(opt_.padding), "; use pad_mode \"pad\"");
  const Shape wshape{out_, in_ / opt_.group, kernel_};  // (out, in/group, k)
  const Initializer w =
      opt_.weight_init.is_default() ? HeUniform(std::sqrt(5.0)) : opt_.weight_init;
  register_parameter("weight", w.make(wshape, opt_.dtype));
  if (opt_.has_bias)
    register_parameter("bias", default_bias(opt_.bias_init, wshape).make({out_}, opt_.dtype));
}

Tensor Conv1d::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() == 3 && x.size(1) == in_, "[Conv1d] expected input (N, C, L) with ", in_,
              " channels, got shape ", shape_str(x.shape()));
  auto [l, r] = opt_.pad_mode == "pad" ? std::pair{pad_left_, pad_right_}
                : opt_.pad_mode == "valid"
                    ? std::pair<int64_t, int64_t>{0, 0}
                    : same_pads(x.size(2), kernel_, opt_.stride, opt_.dilation);
  const int64_t eff = (kernel_ - 1) * opt_.dilation + 1;
  SPORE_CHECK(x.size(2) + l + r >= eff, "[Conv1d] input ", shape_str(x.shape()), " with padding (",
              l, ", ", r, ") is shorter than the (dilated) kernel (", eff, ")");
  spore::Conv2dOptions o;
  o.stride = {1, opt_.stride};
  o.padding = {0, 0, l, r};
  o.dilation = {1, opt_.dilation};
  o.groups = opt_.group;
  // (N, C, L) as (N, C, 1, L); the weight (out, in/group, k) as (out, in/group, 1, k): views.
  const Tensor x4 = x.unsqueeze(2);
  const Tensor w4 = parameter("weight").unsqueeze(2);
  const Tensor y = opt_.has_bias ? conv2d(x4, w4, parameter("bias"), o) : conv2d(x4, w4, o);
  return y.squeeze(2);
}

std::string Conv1d::extend_repr() const {
  return "input_channels=" + std::to_string(in_) + ", output_channels=" + std::to_string(out_) +
         ", kernel_size=" + std::to_string(kernel_) + ", stride=" + std::to_string(opt_.stride) +
         ", pad_mode=" + opt_.pad_mode + ", padding=" + shape_str(opt_.padding) +
         ", dilation=" + std::to_string(opt_.dilation) + ", group=" + std::to_string(opt_.group) +
         ", has_bias=" + fmt_bool(opt_.has_bias);
}

// ---- Conv2dTranspose ----------------------------------------------------------------------------
Conv2dTranspose::Conv2dTranspose(int64_t in_channels, int64_t out_channels, Int2 kernel_size,
                                 Conv2dTransposeOptions opt)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), opt_(std::move(opt)) {
  set_cls_name("Conv2dTranspose");
  SPORE_CHECK(in_ > 0 && out_ > 0,
              "[Conv2dTranspose] in_channels and out_channels must be positive, got ", in_, " and ",
              out_);
  SPORE_CHECK(opt_.group >= 1 && in_ % opt_.group == 0 && out_ % opt_.group == 0,
              "[Conv2dTranspose] group (", opt_.group, ") must divide in_channels (", in_,
              ") and out_channels (", out_, ")");
  SPORE_CHECK(kernel_.h >= 1 && kernel_.w >= 1 && opt_.stride.h >= 1 && opt_.stride.w >= 1 &&
                  opt_.dilation.h >= 1 && opt_.dilation.w >= 1,
              "[Conv2dTranspose] kernel_size, stride and dilation must be >= 1, got kernel_size ",
              shape_str(kernel_.vec()), ", stride ", shape_str(opt_.stride.vec()), ", dilation ",
              shape_str(opt_.dilation.vec()));
  SPORE_CHECK(opt_.pad_mode == "same" || opt_.pad_mode == "valid" || opt_.pad_mode == "pad",
              "[Conv2dTranspose] pad_mode must be 'same', 'valid' or 'pad', got '", opt_.pad_mode,
              "'");
  SPORE_CHECK(opt_.padding.top >= 0 && opt_.padding.bottom >= 0 && opt_.padding.left >= 0 &&
                  opt_.padding.right >= 0,
              "[Conv2dTranspose] padding must be non-negative, got ",
              shape_str(opt_.padding.vec()));
  SPORE_CHECK(opt_.pad_mode == "pad" || opt_.padding.zero(),
              "[Conv2dTranspose] padding must be 0 when pad_mode is '", opt_.pad_mode, "', got ",
              shape_str(opt_.padding.vec()), "; use pad_mode \"pad\"");
  const Int2& op = opt_.output_padding;
  SPORE_CHECK(op.h >= 0 && op.w >= 0 && op.h < opt_.stride.h && op.w < opt_.stride.w,
              "[Conv2dTranspose] output_padding must be in [0, stride), got ", shape_str(op.vec()),
              " with stride ", shape_str(opt_.stride.vec()));
  SPORE_CHECK(opt_.pad_mode == "pad" || (op.h == 0 && op.w == 0),
              "[Conv2dTranspose] output_padding must be 0 when pad_mode is '", opt_.pad_mode,
              "', got ", shape_str(op.vec()), "; use pad_mode \"pad\"");
  const Shape wshape{in_, out_ / opt_.group, kernel_.h, kernel_.w};  // (in, out/group, kh, kw)
  const Initializer w =
      opt_.weight_init.is_default() ? HeUniform(std::sqrt(5.0)) : opt_.weight_init;
  register_parameter("weight", w.make(wshape, opt_.dtype));
  if (opt_.has_bias)
    register_parameter("bias", default_bias(opt_.bias_init, wshape).make({out_}, opt_.dtype));
}

Tensor Conv2dTranspose::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() == 4 && x.size(1) == in_,
              "[Conv2dTranspose] expected input (N, C, H, W) with ", in_, " channels, got shape ",
              shape_str(x.shape()));
  // Per dim: the padding of the convolution being transposed and the output size.
  auto dim = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1,
                 int64_t op) -> std::array<int64_t, 3> {
    const int64_t ek = d * (k - 1) + 1;
    if (opt_.pad_mode == "pad") return {p0, p1, (in - 1) * s - p0 - p1 + ek + op};
    if (opt_.pad_mode == "valid") return {0, 0, (in - 1) * s + std::max(ek, s)};
    const int64_t total = std::max<int64_t>(ek - s, 0);  // "same": output in * s
    return {total / 2, total - total / 2, in * s};
  };
  const auto h = dim(x.size(2), kernel_.h, opt_.stride.h, opt_.dilation.h, opt_.padding.top,
                     opt_.padding.bottom, opt_.output_padding.h);
  const auto w = dim(x.size(3), kernel_.w, opt_.stride.w, opt_.dilation.w, opt_.padding.left,
                     opt_.padding.right, opt_.output_padding.w);
  SPORE_CHECK(h[2] > 0 && w[2] > 0, "[Conv2dTranspose] padding ", shape_str(opt_.padding.vec()),
              " leaves no output for input ", shape_str(x.shape()));
  spore::Conv2dOptions o;
  o.stride = opt_.stride.vec();
  o.padding = {h[0], h[1], w[0], w[1]};
  o.dilation = opt_.dilation.vec();
  o.groups = opt_.group;
  Tensor y = conv_transpose2d(x, parameter("weight"), o, {h[2], w[2]});
  if (opt_.has_bias) y = y + parameter("bias").reshape({1, out_, 1, 1});
  return y;
}

std::string Conv2dTranspose::extend_repr() const {
  return "input_channels=" + std::to_string(in_) + ", output_channels=" + std::to_string(out_) +
         ", kernel_size=" + shape_str(kernel_.vec()) + ", stride=" + shape_str(opt_.stride.vec()) +
         ", pad_mode=" + opt_.pad_mode + ", padding=" + shape_str(opt_.padding.vec()) +
         ", output_padding=" + shape_str(opt_.output_padding.vec()) +
         ", dilation=" + shape_str(opt_.dilation.vec()) + ", group=" + std::to_string(opt_.group) +
         ", has_bias=" + fmt_bool(opt_.has_bias);
}

// ---- Embedding ----------------------------------------------------------------------------------
Embedding::Embedding(int64_t vocab_size, int64_t embedding_size, EmbeddingOptions opt)
    : vocab_(vocab_size), dim_(embedding_size), padding_idx_(opt.padding_idx) {
  set_cls_name("Embedding");
  SPORE_CHECK(vocab_ > 0 && dim_ > 0,
              "[Embedding] vocab_size and embedding_size must be positive, got ", vocab_, " and ",
              dim_);
  SPORE_CHECK(padding_idx_ >= -1 && padding_idx_ < vocab_,
              "[Embedding] padding_idx must be in [0, ", vocab_, ") or -1 for none, got ",
              padding_idx_);
  const Initializer init = opt.embedding_table.is_default() ? Normal(0.01) : opt.embedding_table;
  Tensor table = init.make({vocab_, dim_}, opt.dtype);  // (vocab, dim)
  if (padding_idx_ >= 0) {
    NoGradGuard no_grad;
    assign(table.select(0, padding_idx_), zeros({dim_}, opt.dtype));
  }
  register_parameter("embedding_table", table);
}

Tensor Embedding::construct(const Tensor& ids) {
  SPORE_CHECK_TYPE(is_integral(ids.dtype()),
                   "[Embedding] expected integer indices (int32/int64), got ",
                   dtype_name(ids.dtype()));
  Tensor flat = ids.reshape({-1}).to(kInt64);
  if (!flat.is_symbolic()) {
    for (int64_t v : flat.to_vector<int64_t>())
      SPORE_CHECK_INDEX(v >= 0 && v < vocab_, "[Embedding] index ", v, " out of range [0, ", vocab_,
                        ")");
  }
  Shape s = ids.shape();
  s.push_back(dim_);
  return index_select(parameter("embedding_table"), 0, flat).reshape(s);
}

std::string Embedding::extend_repr() const {
  return "vocab_size=" + std::to_string(vocab_) + ", embedding_size=" + std::to_string(dim_) +
         ", padding_idx=" + (padding_idx_ >= 0 ? std::to_string(padding_idx_) : "None");
}

// ---- Flatten, Dropout, Upsample -----------------------------------------------------------------
Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_(start_dim), end_(end_dim) {
  set_cls_name("Flatten");
}
Tensor Flatten::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() >= 1, "[Flatten] expected an input of rank >= 1, got a scalar");
  if (x.dim() == 1 && start_ == 1) return x;  // nothing to flatten after the batch dim
  return x.flatten(start_, end_);
}
std::string Flatten::extend_repr() const {
  return "start_dim=" + std::to_string(start_) + ", end_dim=" + std::to_string(end_);
}

Dropout::Dropout(DropoutOptions opt) : p_(opt.keep_prob >= 0 ? 1.0 - opt.keep_prob : opt.p) {
  set_cls_name("Dropout");
  SPORE_CHECK(p_ >= 0 && p_ < 1, "[Dropout] p (the drop probability) must be in [0, 1), got ",
              fmt(p_), opt.keep_prob >= 0 ? " (from keep_prob)" : "");
}
Tensor Dropout::construct(const Tensor& x) {
  if (!training() || p_ == 0) return x;
  return dropout(x, p_, true);
}
std::string Dropout::extend_repr() const { return "p=" + fmt(p_); }

Upsample::Upsample(UpsampleOptions opt) : opt_(std::move(opt)) {
  set_cls_name("Upsample");
  SPORE_CHECK(opt_.mode == "nearest", "[Upsample] only mode 'nearest' is supported, got '",
              opt_.mode, "'");
  SPORE_CHECK(opt_.size.empty() != opt_.scale_factor.empty(),
              "[Upsample] give exactly one of size and scale_factor");
  SPORE_CHECK(opt_.size.empty() || opt_.size.size() == 1 || opt_.size.size() == 2,
              "[Upsample] size must have 1 or 2 values, got ", opt_.size.size());
  SPORE_CHECK(
      opt_.scale_factor.empty() || opt_.scale_factor.size() == 1 || opt_.scale_factor.size() == 2,
      "[Upsample] scale_factor must have 1 or 2 values, got ", opt_.scale_factor.size());
  for (double f : opt_.scale_factor)
    SPORE_CHECK(f > 0, "[Upsample] scale_factor must be positive, got ", fmt(f));
  for (int64_t v : opt_.size) SPORE_CHECK(v > 0, "[Upsample] size must be positive, got ", v);
}
Tensor Upsample::construct(const Tensor& x) {
  SPORE_CHECK(x.dim() == 4, "[Upsample] expected input (N, C, H, W), got shape ",
              shape_str(x.shape()));
  std::vector<int64_t> out;
  if (!opt_.size.empty()) {
    out = {opt_.size.front(), opt_.size.back()};
  } else {
    out = {int64_t(std::floor(double(x.size(2)) * opt_.scale_factor.front())),
           int64_t(std::floor(double(x.size(3)) * opt_.scale_factor.back()))};
  }
  return upsample_nearest2d(x, out);
}
std::string Upsample::extend_repr() const {
  if (!opt_.size.empty()) return "size=" + shape_str(opt_.size) + ", mode=nearest";
  std::string s = "scale_factor=(";
  for (size_t i = 0; i < opt_.scale_factor.size(); ++i)
    s += (i ? ", " : "") + fmt(opt_.scale_factor[i]);
  return s + "), mode=nearest";
}

// ---- Pad ----------------------------------------------------------------------------------------
Pad::Pad(std::vector<std::pair<int64_t, int64_t>> paddings, std::string mode)
    : paddings_(std::move(paddings)), mode_(std::move(mode)) {
  set_cls_name("Pad");
  SPORE_CHECK(mode_ == "CONSTANT" || mode_ == "REFLECT" || mode_ == "SYMMETRIC",
              "[Pad] mode must be 'CONSTANT', 'REFLECT' or 'SYMMETRIC', got '", mode_, "'");
  SPORE_CHECK(!paddings_.empty(), "[Pad] paddings must hold one (before, after) pair per dim");
  for (auto [b, a] : paddings_)
    SPORE_CHECK(b >= 0 && a >= 0, "[Pad] paddings must be non-negative, got (", b, ", ", a, ")");
}

Tensor Pad::construct(const Tensor& x) {
  const int64_t r = x.dim(), n = int64_t(paddings_.size());
  SPORE_CHECK(n <= r, "[Pad] ", n, " (before, after) pairs for an input of rank ", r, " (shape ",
              shape_str(x.shape()), "); give at most one pair per dim");
  if (mode_ == "CONSTANT") {
    std::vector<int64_t> pads;  // pad(): (before, after) from the last dim backwards
    for (int64_t i = n - 1; i >= 0; --i) {
      pads.push_back(paddings_[size_t(i)].first);
      pads.push_back(paddings_[size_t(i)].second);
    }
    return pad(x, pads);
  }
  // REFLECT / SYMMETRIC: each padded dim is an index_select of mirrored positions.
  const bool reflect = mode_ == "REFLECT";
  Tensor y = x;
  for (int64_t i = 0; i < n; ++i) {
    const auto [before, after] = paddings_[size_t(i)];
    if (before == 0 && after == 0) continue;
    const int64_t axis = r - n + i, len = x.size(axis);
    const int64_t most = reflect ? len - 1 : len;
    SPORE_CHECK(before <= most && after <= most, "[Pad] ", mode_, " padding (", before, ", ", after,
                ") of dim ", axis, " (size ", len, ") must be at most ", most,
                reflect ? " (the size - 1)" : " (the size)", "; input shape ",
                shape_str(x.shape()));
    std::vector<int64_t> idx;
    for (int64_t j = -before; j < len + after; ++j) {
      int64_t k = j;
      if (j < 0) k = reflect ? -j : -j - 1;
      if (j >= len) k = reflect ? 2 * (len - 1) - j : 2 * len - 1 - j;
      idx.push_back(k);
    }
    y = index_select(y, axis, from_vector(idx, {int64_t(idx.size())}, x.device()));
  }
  return y;
}

std::string Pad::extend_repr() const {
  std::string s = "paddings=(";
  for (size_t i = 0; i < paddings_.size(); ++i)
    s += (i ? ", (" : "(") + std::to_string(paddings_[i].first) + ", " +
         std::to_string(paddings_[i].second) + ")";
  return s + "), mode=" + mode_;
}

}  // namespace spore::nn
