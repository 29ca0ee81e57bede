// Core layers with MindSpore's names, parameter names and defaults: Dense, Conv1d, Conv2d,
// Conv2dTranspose, Embedding, Flatten, Dropout, Upsample, Pad. Options are aggregates for
// designated initializers:
//   nn::Dense fc{400, 120, {.activation = "relu"}};
//   nn::Conv2d conv{1, 6, 5, {.pad_mode = "pad", .padding = 2}};
// Pooling is in pool.h, normalisation in norm.h, activations in activation.h, losses in loss.h,
// attention and the transformer layers in transformer.h.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "spore/nn/activation.h"
#include "spore/nn/cell.h"
#include "spore/nn/init.h"
#include "spore/parallel/sharding.h"

namespace spore::nn {

// An int or a pair (h, w): kernel_size = 3 or {3, 5}.
struct Int2 {
  int64_t h = 1, w = 1;
  Int2(int64_t v) : h(v), w(v) {}  // NOLINT
  Int2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  Int2(std::initializer_list<int64_t> v);
  std::vector<int64_t> vec() const { return {h, w}; }
};
// An int or (top, bottom, left, right): padding = 2 or {1, 1, 2, 2}.
struct Pad4 {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  Pad4(int64_t v = 0) : top(v), bottom(v), left(v), right(v) {}  // NOLINT
  Pad4(std::initializer_list<int64_t> v);
  std::vector<int64_t> vec() const { return {top, bottom, left, right}; }
  bool zero() const { return top == 0 && bottom == 0 && left == 0 && right == 0; }
};

// ---- Dense: y = activation(x @ weight^T + bias), weight (out, in) -----------------------------
struct DenseOptions {
  bool has_bias = true;
  Initializer weight_init{};  // default: HeUniform(sqrt(5))
  Initializer bias_init{};    // default: Uniform(1 / sqrt(in_channels))
  std::string activation{};   // "" = none, else get_activation(name)
  DType dtype = kFloat32;
};
class Dense : public Cell, public parallel::ShardableLayer {
 public:
  Dense(int64_t in_channels, int64_t out_channels, DenseOptions opt = {});
  Tensor construct(const Tensor& x) override;  // (..., in) -> (..., out)
  std::string extend_repr() const override;
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }
  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  // Operator-level sharding (semi_auto_parallel, spore/parallel/sharding.h), MindSpore's MatMul
  // strategy for x @ weight^T: in_strategy ((m, k), (n, k)) cuts the input (M, K) m x k and the
  // weight (N, K) n x k (the bias n). n > 1: column parallel; k > 1: row parallel (the partial
  // outputs are summed). The weight and bias keep only this rank's piece from here on, so call it
  // after set_auto_parallel_context and before building the optimizer. out_strategy ((m', n'),)
  // with the contraction's ranks on a dim of the output: a reduce-scatter instead of an all-reduce.
  // Outside semi_auto_parallel (or on one rank) it does nothing, as in MindSpore.
  Dense& shard(const parallel::Strategy& in_strategy, const parallel::Strategy& out_strategy = {});
  // ShardableLayer (auto_parallel's search): ((dp, 1), (mp, 1)), ((dp, mp), (1, mp)), ((dp, 1), (1,
  // 1)).
  const parallel::Strategy& strategy() const override { return in_strategy_; }
  std::vector<parallel::Strategy> strategy_candidates(int64_t dp, int64_t mp) const override;
  void apply_strategy(const parallel::Strategy& s) override { shard(s); }
  void clear_strategy() override;

 private:
  parallel::Strategy in_strategy_;
  int64_t in_, out_;
  bool has_bias_;
  std::optional<parallel::OpStrategy> strategy_;  // shard()'s, for the engine
  std::string activation_;
  CellPtr act_;
};

// ---- Conv2d: x (N, C, H, W), weight (out, in / group, kh, kw) ---------------------------------
struct Conv2dOptions {
  Int2 stride = 1;
  std::string pad_mode = "same";  // "same" | "valid" | "pad" (MindSpore's default is "same")
  Pad4 padding = 0;               // only with pad_mode "pad"
  Int2 dilation = 1;
  int64_t group = 1;
  bool has_bias = false;      // MindSpore's default
  Initializer weight_init{};  // default: HeUniform(sqrt(5))
  Initializer bias_init{};    // default: Uniform(1 / sqrt(fan_in))
  DType dtype = kFloat32;
};
class Conv2d : public Cell, public parallel::ShardableLayer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, Conv2dOptions opt = {});
  Tensor construct(const Tensor& x) override;  // (N, C, H, W) -> (N, out, H', W')
  std::string extend_repr() const override;
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }
  // The (top, bottom, left, right) padding used for an input of spatial size (h, w).
  std::vector<int64_t> pads_for(int64_t h, int64_t w) const;
  // Operator-level sharding (semi_auto_parallel), MindSpore's Conv2D strategy
  // ((n, c_in, 1, 1), (c_out, c_in, 1, 1)): the batch over n ranks, the output channels over c_out
  // (the weight's rows), the input channels over c_in (partial sums, all-reduced). The weight and
  // bias keep only this rank's piece. Outside semi_auto_parallel it does nothing.
  Conv2d& shard(const parallel::Strategy& in_strategy);
  // ShardableLayer (auto_parallel's search): the output channels, the input channels or neither cut
  // over mp, the batch over dp.
  const parallel::Strategy& strategy() const override { return in_strategy_; }
  std::vector<parallel::Strategy> strategy_candidates(int64_t dp, int64_t mp) const override;
  void apply_strategy(const parallel::Strategy& s) override { shard(s); }
  void clear_strategy() override;

 private:
  parallel::Strategy in_strategy_;
  int64_t in_, out_;
  Int2 kernel_;
  Conv2dOptions opt_;
  std::optional<parallel::OpStrategy> strategy_;  // shard()'s, for the engine
};

// ---- Conv1d: x (N, C, L), weight (out, in / group, k); runs as a Conv2d over (N, C, 1, L) ------
struct Conv1dOptions {
  int64_t stride = 1;
  std::string pad_mode = "same";    // "same" | "valid" | "pad"
  std::vector<int64_t> padding{0};  // only with pad_mode "pad": one value or (left, right)
  int64_t dilation = 1;
  int64_t group = 1;
  bool has_bias = false;
  Initializer weight_init{};  // default: HeUniform(sqrt(5))
  Initializer bias_init{};    // default: Uniform(1 / sqrt(fan_in))
  DType dtype = kFloat32;
};
class Conv1d : public Cell {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions opt = {});
  Tensor construct(const Tensor& x) override;  // (N, C, L) -> (N, out, L')
  std::string extend_repr() const override;
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }

 private:
  int64_t in_, out_, kernel_, pad_left_, pad_right_;
  Conv1dOptions opt_;
};

// ---- Conv2dTranspose: x (N, in, H, W), weight (in, out / group, kh, kw) ------------------------
// The transposed convolution (conv_transpose2d, the data gradient of a Conv2d with the same
// arguments). Output size per dim, ek = dilation * (k - 1) + 1:
//   "same":  H * stride
//   "valid": (H - 1) * stride + max(ek, stride)
//   "pad":   (H - 1) * stride - pad_top - pad_bottom + ek + output_padding
// output_padding (pad_mode "pad" only, < stride) adds rows / columns at the bottom / right.
struct Conv2dTransposeOptions {
  Int2 stride = 1;
  std::string pad_mode = "same";  // "same" | "valid" | "pad"
  Pad4 padding = 0;               // only with pad_mode "pad"
  Int2 output_padding = 0;        // only with pad_mode "pad"
  Int2 dilation = 1;
  int64_t group = 1;
  bool has_bias = false;
  Initializer weight_init{};  // default: HeUniform(sqrt(5))
  Initializer bias_init{};    // default: Uniform(1 / sqrt(fan_in))
  DType dtype = kFloat32;
};
class Conv2dTranspose : public Cell {
 public:
  Conv2dTranspose(int64_t in_channels, int64_t out_channels, Int2 kernel_size,
                  Conv2dTransposeOptions opt = {});
  Tensor construct(const Tensor& x) override;  // (N, in, H, W) -> (N, out, H', W')
  std::string extend_repr() const override;
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }

 private:
  int64_t in_, out_;
  Int2 kernel_;
  Conv2dTransposeOptions opt_;
};

// ---- Embedding: ids (any shape, int) -> ids.shape + (embedding_size,) --------------------------
struct EmbeddingOptions {
  Initializer embedding_table{};  // default: Normal(0.01) as MindSpore ('normal')
  int64_t padding_idx = -1;       // -1: none; else that row starts at zero
  DType dtype = kFloat32;
};
class Embedding : public Cell {
 public:
  Embedding(int64_t vocab_size, int64_t embedding_size, EmbeddingOptions opt = {});
  Tensor construct(const Tensor& ids) override;
  std::string extend_repr() const override;
  Tensor& embedding_table() { return parameter("embedding_table"); }

 private:
  int64_t vocab_, dim_, padding_idx_;
};

// ---- shape and regularisation -------------------------------------------------------------------
class Flatten : public Cell {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  int64_t start_, end_;
};

// MindSpore 2.x: p is the drop probability (keep_prob, the 1.x argument, still accepted).
struct DropoutOptions {
  double p = 0.5;
  double keep_prob = -1;  // when set (>= 0) overrides p as p = 1 - keep_prob
};
class Dropout : public Cell {
 public:
  explicit Dropout(double p = 0.5) : Dropout(DropoutOptions{.p = p}) {}
  explicit Dropout(DropoutOptions opt);
  Tensor construct(const Tensor& x) override;  // identity when not training or p == 0
  std::string extend_repr() const override;
  double p() const { return p_; }

 private:
  double p_;
};

// Nearest-neighbour upsampling of (N, C, H, W): a target size or a scale factor (one for both
// dims, or {h, w}); the output size is floor(H * scale).
struct UpsampleOptions {
  std::vector<int64_t> size{};
  std::vector<double> scale_factor{};
  std::string mode = "nearest";
};
class Upsample : public Cell {
 public:
  explicit Upsample(UpsampleOptions opt);
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  UpsampleOptions opt_;
};

// ---- Pad: MindSpore's nn.Pad -------------------------------------------------------------------
// paddings: one (before, after) pair per dim; fewer pairs than the input has dims pad its last
// dims. mode "CONSTANT" (zeros), "REFLECT" (mirror without the edge: before / after < the dim's
// size) or "SYMMETRIC" (mirror with the edge: before / after <= the dim's size).
class Pad : public Cell {
 public:
  explicit Pad(std::vector<std::pair<int64_t, int64_t>> paddings, std::string mode = "CONSTANT");
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  std::vector<std::pair<int64_t, int64_t>> paddings_;
  std::string mode_;
};

}  // namespace spore::nn
