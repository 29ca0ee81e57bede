// TEMPORARY weak stubs so the tree links while op families are being written; each is replaced
// by the real (strong) definition in its family file. Deleted once every op exists.
#include <optional>
#include <tuple>
#include "spore/ops.h"
namespace spore {
__attribute__((weak)) Tensor neg(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: neg"); }
__attribute__((weak)) Tensor abs(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: abs"); }
__attribute__((weak)) Tensor exp(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: exp"); }
__attribute__((weak)) Tensor log(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: log"); }
__attribute__((weak)) Tensor sqrt(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sqrt"); }
__attribute__((weak)) Tensor rsqrt(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: rsqrt"); }
__attribute__((weak)) Tensor sin(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sin"); }
__attribute__((weak)) Tensor cos(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: cos"); }
__attribute__((weak)) Tensor tanh(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: tanh"); }
__attribute__((weak)) Tensor sigmoid(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sigmoid"); }
__attribute__((weak)) Tensor relu(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: relu"); }
__attribute__((weak)) Tensor relu6(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: relu6"); }
__attribute__((weak)) Tensor leaky_relu(const Tensor& x, double alpha) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: leaky_relu"); }
__attribute__((weak)) Tensor silu(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: silu"); }
__attribute__((weak)) Tensor gelu(const Tensor& x, bool approximate) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: gelu"); }
__attribute__((weak)) Tensor softplus(const Tensor& x, double beta, double threshold) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: softplus"); }
__attribute__((weak)) Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: clamp"); }
__attribute__((weak)) Tensor floor(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: floor"); }
__attribute__((weak)) Tensor ceil(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: ceil"); }
__attribute__((weak)) Tensor round(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: round"); }
__attribute__((weak)) Tensor sign(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sign"); }
__attribute__((weak)) Tensor square(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: square"); }
__attribute__((weak)) Tensor reciprocal(const Tensor& x) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: reciprocal"); }
__attribute__((weak)) Tensor cast(const Tensor& x, DType dtype) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: cast"); }
__attribute__((weak)) Tensor add(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: add"); }
__attribute__((weak)) Tensor sub(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sub"); }
__attribute__((weak)) Tensor mul(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: mul"); }
__attribute__((weak)) Tensor div(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: div"); }
__attribute__((weak)) Tensor pow(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: pow"); }
__attribute__((weak)) Tensor pow(const Tensor& a, double exponent) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: pow"); }
__attribute__((weak)) Tensor maximum(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: maximum"); }
__attribute__((weak)) Tensor minimum(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: minimum"); }
__attribute__((weak)) Tensor equal(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: equal"); }
__attribute__((weak)) Tensor not_equal(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: not_equal"); }
__attribute__((weak)) Tensor less(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: less"); }
__attribute__((weak)) Tensor less_equal(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: less_equal"); }
__attribute__((weak)) Tensor greater(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: greater"); }
__attribute__((weak)) Tensor greater_equal(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: greater_equal"); }
__attribute__((weak)) Tensor logical_and(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: logical_and"); }
__attribute__((weak)) Tensor logical_or(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: logical_or"); }
__attribute__((weak)) Tensor logical_xor(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: logical_xor"); }
__attribute__((weak)) Tensor logical_not(const Tensor& a) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: logical_not"); }
__attribute__((weak)) Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: where"); }
__attribute__((weak)) Tensor operator+(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator+"); }
__attribute__((weak)) Tensor operator-(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator-"); }
__attribute__((weak)) Tensor operator*(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator*"); }
__attribute__((weak)) Tensor operator/(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator/"); }
__attribute__((weak)) Tensor operator+(const Tensor& a, double b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator+"); }
__attribute__((weak)) Tensor operator-(const Tensor& a, double b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator-"); }
__attribute__((weak)) Tensor operator*(const Tensor& a, double b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator*"); }
__attribute__((weak)) Tensor operator/(const Tensor& a, double b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator/"); }
__attribute__((weak)) Tensor operator+(double a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator+"); }
__attribute__((weak)) Tensor operator-(double a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator-"); }
__attribute__((weak)) Tensor operator*(double a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator*"); }
__attribute__((weak)) Tensor operator/(double a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: operator/"); }
__attribute__((weak)) Tensor sum(const Tensor& x, Axes axes, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sum"); }
__attribute__((weak)) Tensor mean(const Tensor& x, Axes axes, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: mean"); }
__attribute__((weak)) Tensor amax(const Tensor& x, Axes axes, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: amax"); }
__attribute__((weak)) Tensor amin(const Tensor& x, Axes axes, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: amin"); }
__attribute__((weak)) Tensor prod(const Tensor& x, Axes axes, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: prod"); }
__attribute__((weak)) Tensor argmax(const Tensor& x, int64_t axis, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: argmax"); }
__attribute__((weak)) Tensor argmin(const Tensor& x, int64_t axis, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: argmin"); }
__attribute__((weak)) Tensor var(const Tensor& x, Axes axes, int64_t ddof, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: var"); }
__attribute__((weak)) Tensor std(const Tensor& x, Axes axes, int64_t ddof, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: std"); }
__attribute__((weak)) Tensor logsumexp(const Tensor& x, Axes axes, bool keepdims) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: logsumexp"); }
__attribute__((weak)) Tensor sum_to_shape(const Tensor& x, const Shape& shape) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sum_to_shape"); }
__attribute__((weak)) Tensor matmul(const Tensor& a, const Tensor& b) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: matmul"); }
__attribute__((weak)) Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dOptions& opt) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: conv2d"); }
__attribute__((weak)) Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opt) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: conv2d"); }
__attribute__((weak)) Tensor max_pool2d(const Tensor& x, const Pool2dOptions& opt) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: max_pool2d"); }
__attribute__((weak)) std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Pool2dOptions& opt) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: max_pool2d_with_indices"); }
__attribute__((weak)) Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& opt) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: avg_pool2d"); }
__attribute__((weak)) Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: adaptive_avg_pool2d"); }
__attribute__((weak)) std::tuple<Tensor, Tensor, Tensor> batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: batch_norm_train"); }
__attribute__((weak)) Tensor batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& var, double eps) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: batch_norm_infer"); }
__attribute__((weak)) Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t normalized_ndim, double eps) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: layer_norm"); }
__attribute__((weak)) Tensor softmax(const Tensor& x, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: softmax"); }
__attribute__((weak)) Tensor log_softmax(const Tensor& x, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: log_softmax"); }
__attribute__((weak)) Tensor concat(const std::vector<Tensor>& xs, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: concat"); }
__attribute__((weak)) Tensor stack(const std::vector<Tensor>& xs, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: stack"); }
__attribute__((weak)) std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: split"); }
__attribute__((weak)) std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: chunk"); }
__attribute__((weak)) Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: gather"); }
__attribute__((weak)) Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: index_select"); }
__attribute__((weak)) Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: scatter_add"); }
__attribute__((weak)) Tensor pad(const Tensor& x, std::vector<int64_t> pads, double value) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: pad"); }
__attribute__((weak)) Tensor one_hot(const Tensor& index, int64_t depth, DType dtype) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: one_hot"); }
__attribute__((weak)) Tensor dropout(const Tensor& x, double p, bool training) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: dropout"); }
__attribute__((weak)) Tensor upsample_nearest2d(const Tensor& x, std::vector<int64_t> output_size) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: upsample_nearest2d"); }
__attribute__((weak)) std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis, bool largest, bool sorted) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: topk"); }
__attribute__((weak)) std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t axis, bool descending) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: sort"); }
__attribute__((weak)) Tensor argsort(const Tensor& x, int64_t axis, bool descending) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: argsort"); }
__attribute__((weak)) Tensor cumsum(const Tensor& x, int64_t axis) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: cumsum"); }
__attribute__((weak)) void assign(const Tensor& dst, const Tensor& src) { SPORE_THROW(ErrorKind::NotImplemented, "not implemented yet: assign"); }
}
