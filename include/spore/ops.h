// The functional API: one function per op (primitive or composite). Primitives are listed in
// src/ops/ops.def; composites are built from them. Binary ops promote dtypes (spore/dtype.h) and
// broadcast numpy-style. A double argument acts like a Python scalar: it takes the tensor's dtype.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "spore/tensor.h"

namespace spore {

using Axes = std::vector<int64_t>;

// ---- elementwise --------------------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);  // clamp(x, 0, 6)
Tensor leaky_relu(const Tensor& x, double alpha = 0.01);
Tensor silu(const Tensor& x);
Tensor gelu(const Tensor& x, bool approximate = false);  // approximate: the tanh form
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor erf(const Tensor& x);  // the error function (float; integers become float32)
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
// The ToDevice primitive (Tensor::to(Device)): x itself when already there.
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b) = delete;  // ambiguous: use equal()

// ---- reductions (axes empty = all; negative axes count from the end) ---------------------------
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor amax(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor amin(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor prod(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdims = false);  // int64
Tensor argmin(const Tensor& x, int64_t axis, bool keepdims = false);
Tensor var(const Tensor& x, Axes axes = {}, int64_t ddof = 0, bool keepdims = false);
Tensor std(const Tensor& x, Axes axes = {}, int64_t ddof = 0, bool keepdims = false);
Tensor logsumexp(const Tensor& x, Axes axes, bool keepdims = false);
// Sums a broadcast tensor back down to `shape` (the gradient of broadcasting).
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

// ---- linear algebra and nn -------------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);  // (..., M, K) @ (..., K, N) -> (..., M, N)
// x (N, C, H, W), w (O, C/groups, kh, kw).
struct Conv2dOptions {
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0};  // top, bottom, left, right (2 values: symmetric h, w)
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
};
Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dOptions& opt = {});
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opt = {});
// The transposed convolution (conv2d's data gradient): x (N, C_in, H, W), w (C_in, C_out/groups,
// kh, kw) -> (N, C_out, H', W'). opt describes the convolution being transposed (its stride,
// padding, dilation, groups); H' = (H - 1) * stride - pad_top - pad_bottom + dilation * (kh - 1) +
// 1 unless output_size (h, w) asks for up to stride - 1 more (PyTorch's output_padding).
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Conv2dOptions& opt = {},
                        std::vector<int64_t> output_size = {});
struct Pool2dOptions {
  std::vector<int64_t> kernel_size{2, 2};
  std::vector<int64_t> stride{};             // empty: = kernel_size
  std::vector<int64_t> padding{0, 0, 0, 0};  // top, bottom, left, right (2 values: symmetric)
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg pool only
};
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& opt);
inline Tensor max_pool2d(const Tensor& x, int64_t k) {
  return max_pool2d(x, Pool2dOptions{.kernel_size = {k, k}});
}
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Pool2dOptions& opt);
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& opt);
Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size);
// Training: normalises with batch statistics; returns (y, batch_mean, batch_var_unbiased).
std::tuple<Tensor, Tensor, Tensor> batch_norm_train(const Tensor& x, const Tensor& gamma,
                                                    const Tensor& beta, double eps);
Tensor batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& mean, const Tensor& var, double eps);
// Normalises over the last normalized_shape.size() dims.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t normalized_ndim,
                  double eps = 1e-5);

// Attention over the last two dims: weights = softmax(q @ k^T * scale + mask), out = weights @ v,
// with q (..., L, E), k (..., S, E), v (..., S, Ev) and batch dims that broadcast. mask: undefined,
// or a float tensor added to the scores (-inf excludes a position), broadcast to (..., L, S); a
// boolean mask is refused (conventions differ: convert it with where()). scale: default
// 1 / sqrt(E). dropout_p > 0 drops weights (scaled by 1 / (1 - p)) before they meet v. Returns
// (out (..., L, Ev), weights (..., L, S)). A composite: the one attention computation of the tree
// (nn::MultiheadAttention and the models use it).
std::pair<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k,
                                                       const Tensor& v, const Tensor& mask = {},
                                                       double dropout_p = 0,
                                                       std::optional<double> scale = {});

// ---- softmax, indexing, shape ops ------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);
std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis = 0);
Tensor gather(const Tensor& x, int64_t axis, const Tensor& index);  // torch.gather
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src);
// pads: (before, after) per dim from the LAST dim backwards, as torch.nn.functional.pad.
Tensor pad(const Tensor& x, std::vector<int64_t> pads, double value = 0);
Tensor one_hot(const Tensor& index, int64_t depth, DType dtype = kFloat32);
Tensor dropout(const Tensor& x, double p, bool training = true);
Tensor upsample_nearest2d(const Tensor& x, std::vector<int64_t> output_size);
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true,
                               bool sorted = true);
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t axis = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false);
Tensor cumsum(const Tensor& x, int64_t axis);

// ---- in-place state updates (no autograd) ------------------------------------------------------
void assign(const Tensor& dst, const Tensor& src);  // dst <- src (broadcast, cast)

}  // namespace spore
