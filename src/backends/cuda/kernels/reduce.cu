// Reductions and softmax on the GPU. Sum / mean over any axes: each output element is one warp's
// job, folding the reduced elements (strided through the input) with float32 (double for float64,
// int64 for integers) accumulation, then a warp shuffle. Softmax / log-softmax along one axis: one
// warp per row, max and sum by shuffles, in float32 for half types.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "ops/op.h"

namespace spore::cuda {
namespace {

template <class T> struct Acc { using type = float; };
template <> struct Acc<double> { using type = double; };
template <> struct Acc<int32_t> { using type = int64_t; };
template <> struct Acc<int64_t> { using type = int64_t; };
template <> struct Acc<uint8_t> { using type = int64_t; };
template <> struct Acc<int8_t> { using type = int64_t; };
template <> struct Acc<bool> { using type = int64_t; };

template <class A, class T> __device__ __forceinline__ A load(T x) { return A(x); }
template <> __device__ __forceinline__ float load<float, __half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float load<float, __nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T, class A> __device__ __forceinline__ T store(A x) { return T(x); }
template <> __device__ __forceinline__ __half store<__half, float>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, float>(float x) { return __float2bfloat16(x); }

// The input seen as (kept dims..., reduced dims...): kept dims index the output (row-major), the
// reduced ones are walked by each warp.
struct ReduceIndex {
  int nkeep = 0, nred = 0;
  int64_t keep_size[8], keep_stride[8], red_size[8], red_stride[8];
  int64_t count = 1;  // reduced elements per output
};

template <class T, class A>
__global__ void sum_kernel(T* out, const T* x, ReduceIndex ix, int64_t n_out, double scale) {
  const int lane = threadIdx.x % 32;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t o = warp; o < n_out; o += warps) {
    int64_t base = 0, rest = o;
    for (int d = ix.nkeep - 1; d >= 0; --d) {
      base += (rest % ix.keep_size[d]) * ix.keep_stride[d];
      rest /= ix.keep_size[d];
    }
    A acc = A(0);
    for (int64_t r = lane; r < ix.count; r += 32) {
      int64_t off = base, q = r;
      for (int d = ix.nred - 1; d >= 0; --d) {
        off += (q % ix.red_size[d]) * ix.red_stride[d];
        q /= ix.red_size[d];
      }
      acc += load<A>(x[off]);
    }
    for (int s = 16; s > 0; s /= 2) acc += __shfl_down_sync(0xffffffffu, acc, s);
    if (lane == 0) out[o] = store<T>(scale == 1.0 ? acc : A(double(acc) * scale));
  }
}

ReduceIndex reduce_index(const Tensor& x, const std::vector<int64_t>& axes_in) {
  std::vector<int64_t> axes = ops::normalize_axes(axes_in, x.dim());
  std::vector<bool> red(size_t(x.dim()), axes.empty());
  for (int64_t a : axes) red[size_t(a)] = true;
  ReduceIndex ix;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 1) continue;
    if (red[size_t(d)]) {
      SPORE_CHECK(ix.nred < 8, "[GPU] reductions take at most 8 reduced dims");
      ix.red_size[ix.nred] = x.size(d), ix.red_stride[ix.nred++] = x.strides()[size_t(d)];
      ix.count *= x.size(d);
    } else {
      SPORE_CHECK(ix.nkeep < 8, "[GPU] reductions take at most 8 kept dims");
      ix.keep_size[ix.nkeep] = x.size(d), ix.keep_stride[ix.nkeep++] = x.strides()[size_t(d)];
    }
  }
  return ix;
}

template <class T>
void sum_typed(ops::KernelContext& ctx, bool mean) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  const ReduceIndex ix = reduce_index(x, ctx.attrs.get_ints("axes", {}));
  const double scale = mean ? (ix.count ? 1.0 / double(ix.count) : 0.0) : 1.0;
  const Launch1d l = launch_1d(n_out * 32);
  sum_kernel<T, typename Acc<T>::type><<<l.blocks, l.threads, 0, native(ctx.stream->native_handle())>>>(
      static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()), ix, n_out, scale);
  SPORE_CUDA_CHECK_LAUNCH();
}

void reduce(ops::KernelContext& ctx, bool mean) {
  switch (ctx.inputs[0].dtype()) {
    case kFloat32: sum_typed<float>(ctx, mean); break;
    case kFloat16: sum_typed<__half>(ctx, mean); break;
    case kBFloat16: sum_typed<__nv_bfloat16>(ctx, mean); break;
    case kFloat64: sum_typed<double>(ctx, mean); break;
    case kInt32: sum_typed<int32_t>(ctx, mean); break;
    case kInt64: sum_typed<int64_t>(ctx, mean); break;
    default: SPORE_THROW(ErrorKind::TypeError, "[GPU] ", ctx.def.name, ": no kernel for ", dtype_name(ctx.inputs[0].dtype()));
  }
}
void sum(ops::KernelContext& ctx) { reduce(ctx, false); }
void mean(ops::KernelContext& ctx) { reduce(ctx, true); }

// ---- softmax -------------------------------------------------------------------------------------
// Rows of length n along `axis`: (outer, n, inner) of the contiguous input; row r = (o, i) reads
// x[o * n * inner + k * inner + i].
template <class T, bool Log>
__global__ void softmax_kernel(T* out, const T* x, int64_t rows, int64_t n, int64_t inner) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % 32;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t r = warp; r < rows; r += warps) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    A m = -INFINITY;
    for (int64_t k = lane; k < n; k += 32) m = max(m, load<A>(x[base + k * inner]));
    for (int s = 16; s > 0; s /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, s));
    A sum = 0;
    for (int64_t k = lane; k < n; k += 32) sum += exp(load<A>(x[base + k * inner]) - m);
    for (int s = 16; s > 0; s /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, s);
    const A lse = log(sum);
    for (int64_t k = lane; k < n; k += 32) {
      const A v = load<A>(x[base + k * inner]) - m;
      out[base + k * inner] = store<T>(Log ? A(v - lse) : A(exp(v) / sum));
    }
  }
}

template <bool Log>
void softmax(ops::KernelContext& ctx) {
  const Tensor x = ctx.inputs[0].contiguous();  // a copy kernel on this device when strided
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const int64_t axis = ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim());
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = x.dim() ? x.size(axis) : 1, rows = out.numel() / std::max<int64_t>(n, 1);
  const Launch1d l = launch_1d(rows * 32);
  cudaStream_t s = native(ctx.stream->native_handle());
  switch (x.dtype()) {
    case kFloat32: softmax_kernel<float, Log><<<l.blocks, l.threads, 0, s>>>(static_cast<float*>(out.data_ptr()), static_cast<const float*>(x.data_ptr()), rows, n, inner); break;
    case kFloat16: softmax_kernel<__half, Log><<<l.blocks, l.threads, 0, s>>>(static_cast<__half*>(out.data_ptr()), static_cast<const __half*>(x.data_ptr()), rows, n, inner); break;
    case kBFloat16: softmax_kernel<__nv_bfloat16, Log><<<l.blocks, l.threads, 0, s>>>(static_cast<__nv_bfloat16*>(out.data_ptr()), static_cast<const __nv_bfloat16*>(x.data_ptr()), rows, n, inner); break;
    case kFloat64: softmax_kernel<double, Log><<<l.blocks, l.threads, 0, s>>>(static_cast<double*>(out.data_ptr()), static_cast<const double*>(x.data_ptr()), rows, n, inner); break;
    default: SPORE_THROW(ErrorKind::TypeError, "[GPU] softmax: no kernel for ", dtype_name(x.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

SPORE_KERNEL(GPU, Sum, sum, kFloat32, kFloat16, kBFloat16, kFloat64);
SPORE_KERNEL(GPU, Mean, mean, kFloat32, kFloat16, kBFloat16, kFloat64);
SPORE_KERNEL(GPU, Softmax, softmax<false>, kFloat32, kFloat16, kBFloat16, kFloat64);
SPORE_KERNEL(GPU, LogSoftmax, softmax<true>, kFloat32, kFloat16, kBFloat16, kFloat64);

}  // namespace spore::cuda
