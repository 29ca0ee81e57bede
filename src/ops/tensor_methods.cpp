// The Tensor methods that are sugar for ops (spore/ops.h) or autograd: declared with Tensor in the
// core layer, defined here in the compiler layer that implements them.
#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/tensor.h"

namespace spore {

Tensor Tensor::to(DType t) const { return t == dtype() ? *this : cast(*this, t); }
Tensor Tensor::to(Device d, bool non_blocking) const { return to_device(*this, d, non_blocking); }
void Tensor::backward(const Tensor& gradient) const { autograd::backward(*this, gradient); }
Tensor Tensor::operator-() const { return neg(*this); }
Tensor Tensor::sum(std::vector<int64_t> axes, bool keepdims) const {
  return spore::sum(*this, std::move(axes), keepdims);
}
Tensor Tensor::mean(std::vector<int64_t> axes, bool keepdims) const {
  return spore::mean(*this, std::move(axes), keepdims);
}
Tensor Tensor::matmul(const Tensor& other) const { return spore::matmul(*this, other); }

}  // namespace spore
