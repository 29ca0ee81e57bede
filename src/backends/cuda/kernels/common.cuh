// What the CUDA kernel files share: typed data pointers, dtype visitors with the device's half
// types, views on a tensor's storage, the strided copy (elementwise.cu) and grid-stride loops.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "backends/backend.h"
#include "backends/cuda/bad_value.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "ops/op.h"

namespace spore::cuda {

template <class T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(const_cast<void*>(t.data_ptr()));
}

inline cudaStream_t stream_of(const ops::KernelContext& ctx) {
  return native(ctx.stream->native_handle());
}

template <class T>
constexpr bool kHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T>
constexpr bool kFloating = std::is_floating_point_v<T> || kHalf<T>;

// float for the half types, else T itself.
template <class T>
using calc_t = std::conditional_t<kHalf<T>, float, T>;

template <class To, class From>
__host__ __device__ __forceinline__ To cvt(From x) {
  if constexpr (std::is_same_v<To, From>)
    return x;
  else if constexpr (std::is_same_v<To, __half>)
    return __float2half(float(calc_t<From>(x)));
  else if constexpr (std::is_same_v<To, __nv_bfloat16>)
    return __float2bfloat16(float(calc_t<From>(x)));
  else if constexpr (std::is_same_v<From, __half>)
    return To(__half2float(x));
  else if constexpr (std::is_same_v<From, __nv_bfloat16>)
    return To(__bfloat162float(x));
  else if constexpr (std::is_same_v<To, bool>)
    return x != From(0);
  else
    return To(x);
}

// Calls f(T{}) with the C++ type of dt.
template <class F>
void visit_all(DType dt, const char* op, F&& f) {
  switch (dt) {
    case kFloat32:
      f(float{});
      break;
    case kFloat16:
      f(__half{});
      break;
    case kBFloat16:
      f(__nv_bfloat16{});
      break;
    case kFloat64:
      f(double{});
      break;
    case kInt32:
      f(int32_t{});
      break;
    case kInt64:
      f(int64_t{});
      break;
    case kUInt8:
      f(uint8_t{});
      break;
    case kInt8:
      f(int8_t{});
      break;
    case kBool:
      f(bool{});
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] ", op, ": no kernel for ", dtype_name(dt));
  }
}
template <class F>
void visit_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case kFloat32:
      f(float{});
      break;
    case kFloat16:
      f(__half{});
      break;
    case kBFloat16:
      f(__nv_bfloat16{});
      break;
    case kFloat64:
      f(double{});
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] ", op, ": no kernel for ", dtype_name(dt));
  }
}
template <class F>
void visit_index(DType dt, const char* op, F&& f) {
  switch (dt) {
    case kUInt8:
      f(uint8_t{});
      break;
    case kInt8:
      f(int8_t{});
      break;
    case kInt32:
      f(int32_t{});
      break;
    case kInt64:
      f(int64_t{});
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] ", op, ": the index must be an integer tensor, got ",
                  dtype_name(dt));
  }
}

// A view on t's storage with the given shape, strides and offset (kernels write through these).
inline Tensor alias(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl().storage;
  impl->dtype = t.dtype();
  impl->device = t.device();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  return Tensor(std::move(impl));
}

// dst <- src: same shape and dtype, any strides (elementwise.cu).
void copy_strided(const Tensor& dst, const Tensor& src, cudaStream_t stream);

// Up to 16 dims and three operands' strides (in elements), for kernels that walk a shape.
constexpr int kWalkDims = 16;
struct Walk {
  int nd = 0;
  int64_t size[kWalkDims] = {};
  int64_t st[3][kWalkDims] = {};
};
// The offsets of element i (row-major over size) in each operand.
__device__ __forceinline__ void walk_offsets(const Walk& w, int64_t i, int64_t (&off)[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = w.nd - 1; d >= 0; --d) {
    const int64_t c = i % w.size[d];
    i /= w.size[d];
    off[0] += c * w.st[0][d];
    off[1] += c * w.st[1][d];
    off[2] += c * w.st[2][d];
  }
}

// Reports an out-of-range value found by a kernel (bad_value.h): the output element stays 0.
__device__ __forceinline__ void report_bad_value(BadValue* slot, int32_t site, int64_t value,
                                                 int64_t bound) {
  slot->value = value;
  slot->bound = bound;
  slot->site = site;
}
#define SPORE_GRID_LOOP(i, n)                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

}  // namespace spore::cuda
