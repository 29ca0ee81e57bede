// Reductions and softmax on the GPU. Sum / mean / prod / max / min over any axes, argmax / argmin
// over one: laid out by reduce_plan.h (a warp per output when the reduced elements are the fastest
// in memory, else a thread per output; the reduced range split in chunks and merged by a second
// kernel when there are too few outputs to fill the GPU), accumulating in float32 for the half
// types, float64 for float64 and integer means, int64 for integer sums, as the CPU kernels do.
// Softmax / log-softmax along one axis: one warp per row, max and sum by shuffles.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits>
#include <type_traits>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_info.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/reduce_plan.h"
#include "ops/op.h"

namespace spore::cuda {
namespace {

template <class T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};
template <>
struct Acc<int32_t> {
  using type = int64_t;
};
template <>
struct Acc<int64_t> {
  using type = int64_t;
};
template <>
struct Acc<uint8_t> {
  using type = int64_t;
};
template <>
struct Acc<int8_t> {
  using type = int64_t;
};
template <>
struct Acc<bool> {
  using type = int64_t;
};

template <class A, class T>
__device__ __forceinline__ A load(T x) {
  return A(x);
}
template <>
__device__ __forceinline__ float load<float, __half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float load<float, __nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T, class A>
__device__ __forceinline__ T store(A x) {
  return T(x);
}
template <>
__device__ __forceinline__ __half store<__half, float>(float x) {
  return __float2half(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, float>(float x) {
  return __float2bfloat16(x);
}

// ---- reductions ---------------------------------------------------------------------------------
// Functors over the accumulator type A: init, step (fold one element), merge (two partials).
struct SumOp {
  template <class A>
  __device__ static A init() {
    return A(0);
  }
  template <class A>
  __device__ static A step(A a, A v) {
    return a + v;
  }
  template <class A>
  __device__ static A merge(A a, A b) {
    return a + b;
  }
};
struct ProdOp {
  template <class A>
  __device__ static A init() {
    return A(1);
  }
  template <class A>
  __device__ static A step(A a, A v) {
    return a * v;
  }
  template <class A>
  __device__ static A merge(A a, A b) {
    return a * b;
  }
};
// NaN propagates, as numpy and the CPU kernels (`v != v` is false for integers).
struct MaxOp {
  template <class A>
  __device__ static A init() {
    if constexpr (std::is_floating_point_v<A>)
      return A(-INFINITY);
    else
      return std::numeric_limits<A>::lowest();
  }
  template <class A>
  __device__ static A step(A a, A v) {
    return (v > a || v != v) ? v : a;
  }
  template <class A>
  __device__ static A merge(A a, A b) {
    return (b > a || b != b) ? b : a;
  }
};
struct MinOp {
  template <class A>
  __device__ static A init() {
    if constexpr (std::is_floating_point_v<A>)
      return A(INFINITY);
    else
      return std::numeric_limits<A>::max();
  }
  template <class A>
  __device__ static A step(A a, A v) {
    return (v < a || v != v) ? v : a;
  }
  template <class A>
  __device__ static A merge(A a, A b) {
    return (b < a || b != b) ? b : a;
  }
};

// What is stored: the accumulator scaled (mean), NaN for an empty mean, converted to Out.
template <class Out, class A>
struct Finish {
  double scale = 1;
  bool empty_nan = false;
  __device__ Out operator()(A a) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (empty_nan) return store<Out>(A(NAN));
      if (scale != 1) return store<Out>(A(double(a) * scale));
    }
    return store<Out>(a);
  }
};

__device__ __forceinline__ int64_t keep_offset(const ReducePlan& p, int64_t o) {
  int64_t off = 0;
  for (int d = p.nkeep - 1; d >= 0; --d) {
    off += (o % p.keep_size[d]) * p.keep_stride[d];
    o /= p.keep_size[d];
  }
  return off;
}
__device__ __forceinline__ int64_t red_offset(const ReducePlan& p, int64_t r) {
  if (p.nred == 1) return r * p.red_stride[0];
  int64_t off = 0;
  for (int d = p.nred - 1; d >= 0; --d) {
    off += (r % p.red_size[d]) * p.red_stride[d];
    r /= p.red_size[d];
  }
  return off;
}

// Work item i = (chunk s, output o) with o = i % nout, so neighbouring threads (thread mode) take
// neighbouring outputs. split == 1 stores finished outputs; otherwise partials [s * nout + o].
template <class Op, class T, class A, class Out>
__global__ void reduce_kernel(const T* x, ReducePlan p, A* partial, Out* out, Finish<Out, A> fin) {
  const int64_t items = p.nout * p.split;
  const int lane = p.warp ? int(threadIdx.x % 32) : 0;
  const int width = p.warp ? 32 : 1;
  const int64_t first = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / width;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / width;
  for (int64_t i = first; i < items; i += step) {
    const int64_t o = i % p.nout, s = i / p.nout;
    const int64_t base = keep_offset(p, o);
    const int64_t r0 = s * p.chunk, r1 = min(p.count, r0 + p.chunk);
    A acc = Op::template init<A>();
    for (int64_t r = r0 + lane; r < r1; r += width)
      acc = Op::step(acc, load<A>(x[base + red_offset(p, r)]));
    if (p.warp)
      for (int k = 16; k > 0; k /= 2)
        acc = Op::merge(acc, A(__shfl_down_sync(0xffffffffu, acc, k)));
    if (lane == 0) {
      if (p.split == 1)
        out[o] = fin(acc);
      else
        partial[s * p.nout + o] = acc;
    }
  }
}

// Second pass: each output merges its `split` partials.
template <class Op, class A, class Out>
__global__ void merge_kernel(const A* partial, int64_t nout, int64_t split, Out* out,
                             Finish<Out, A> fin) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < nout;
       o += int64_t(gridDim.x) * blockDim.x) {
    A acc = partial[o];
    for (int64_t s = 1; s < split; ++s) acc = Op::merge(acc, partial[s * nout + o]);
    out[o] = fin(acc);
  }
}

std::vector<bool> reduced_dims(const ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const std::vector<int64_t> axes = ops::normalize_axes(ctx.attrs.get_ints("axes", {}), x.dim());
  std::vector<bool> red(size_t(x.dim()), axes.empty());
  for (int64_t a : axes)
    if (a < x.dim()) red[size_t(a)] = true;
  return red;
}

ReducePlan plan_for(const Tensor& x, const std::vector<bool>& red, int device) {
  ReducePlan p;
  SPORE_CHECK(make_reduce_plan(x.shape(), x.strides(), red, p), "[GPU] a reduction over more than ",
              kReduceMaxDims, " separate dims; make the input contiguous first");
  choose_split(p, sm_count(device));
  return p;
}

template <class Op, class T, class A, class Out>
void run_reduce(ops::KernelContext& ctx, Finish<Out, A> fin) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const int device = out.device().index;
  const ReducePlan p = plan_for(x, reduced_dims(ctx), device);
  cudaStream_t s = native(ctx.stream->native_handle());
  const int64_t items = p.nout * p.split;
  const Launch1d l = launch_1d(p.warp ? items * 32 : items);
  const T* src = static_cast<const T*>(x.data_ptr());
  Out* dst = static_cast<Out*>(out.data_ptr());
  if (p.split == 1) {
    reduce_kernel<Op, T, A, Out><<<l.blocks, l.threads, 0, s>>>(src, p, nullptr, dst, fin);
    SPORE_CUDA_CHECK_LAUNCH();
    return;
  }
  // Partials in a scratch block of this stream (stream order keeps it alive for the second pass).
  const Tensor scratch = Tensor::empty({items * int64_t(sizeof(A))}, kUInt8, out.device());
  A* partial = static_cast<A*>(const_cast<void*>(scratch.data_ptr()));
  reduce_kernel<Op, T, A, Out><<<l.blocks, l.threads, 0, s>>>(src, p, partial, dst, fin);
  SPORE_CUDA_CHECK_LAUNCH();
  const Launch1d m = launch_1d(p.nout);
  merge_kernel<Op, A, Out><<<m.blocks, m.threads, 0, s>>>(partial, p.nout, p.split, dst, fin);
  SPORE_CUDA_CHECK_LAUNCH();
}

// Calls f(T{}) with the C++ type of dtype dt (device types for the half ones).
template <class F>
void visit(DType dt, const char* op, F&& f) {
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

template <class T>
constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Sum and prod: floats keep their dtype (halves accumulate in float32); integers and bool give
// int64. Mean: floats keep their dtype, integers give float32 (accumulated in float64).
template <class Op>
void accumulate(ops::KernelContext& ctx, bool is_mean) {
  const Tensor& x = ctx.inputs[0];
  int64_t count = 1;
  const std::vector<bool> red = reduced_dims(ctx);
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) count *= x.size(int64_t(d));
  visit(x.dtype(), ctx.def.name, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloat<T>) {
      using A = typename Acc<T>::type;
      Finish<T, A> fin;
      if (is_mean) fin.scale = count ? 1.0 / double(count) : 1.0, fin.empty_nan = count == 0;
      run_reduce<Op, T, A, T>(ctx, fin);
    } else if (is_mean) {
      Finish<float, double> fin;
      fin.scale = count ? 1.0 / double(count) : 1.0, fin.empty_nan = count == 0;
      run_reduce<Op, T, double, float>(ctx, fin);
    } else {
      run_reduce<Op, T, int64_t, int64_t>(ctx, Finish<int64_t, int64_t>{});
    }
  });
}
void sum(ops::KernelContext& ctx) { accumulate<SumOp>(ctx, false); }
void mean(ops::KernelContext& ctx) { accumulate<SumOp>(ctx, true); }
void prod(ops::KernelContext& ctx) { accumulate<ProdOp>(ctx, false); }

// Max / min: exact, so only the half types (float32) and bool (int64) accumulate wider.
template <class Op>
void extremum(ops::KernelContext& ctx) {
  visit(ctx.inputs[0].dtype(), ctx.def.name, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                                 float, std::conditional_t<std::is_same_v<T, bool>, int64_t, T>>;
    run_reduce<Op, T, A, T>(ctx, Finish<T, A>{});
  });
}

// ---- argmax / argmin over one axis: the first extremal position, NaN counting as the extremum
// ---- (value, index) pairs; index INT64_MAX marks an empty lane.
template <bool kMax, class A>
__device__ __forceinline__ bool better(A v, int64_t i, A best, int64_t bi) {
  if (i == INT64_MAX) return false;
  if (bi == INT64_MAX) return true;
  const bool v_nan = v != v, b_nan = best != best;
  if (b_nan) return v_nan && i < bi;
  if (v_nan) return true;
  if (kMax ? v > best : v < best) return true;
  return v == best && i < bi;
}

template <bool kMax, class T, class A>
__global__ void arg_kernel(const T* x, ReducePlan p, int64_t* out) {
  const int lane = p.warp ? int(threadIdx.x % 32) : 0;
  const int width = p.warp ? 32 : 1;
  const int64_t first = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / width;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / width;
  for (int64_t o = first; o < p.nout; o += step) {
    const int64_t base = keep_offset(p, o);
    A best = A(0);
    int64_t bi = INT64_MAX;
    for (int64_t r = lane; r < p.count; r += width) {
      const A v = load<A>(x[base + red_offset(p, r)]);
      if (better<kMax>(v, r, best, bi)) best = v, bi = r;
    }
    if (p.warp)
      for (int k = 16; k > 0; k /= 2) {
        const A v = A(__shfl_down_sync(0xffffffffu, best, k));
        const int64_t i = __shfl_down_sync(0xffffffffu, bi, k);
        if (better<kMax>(v, i, best, bi)) best = v, bi = i;
      }
    if (lane == 0) out[o] = bi == INT64_MAX ? 0 : bi;
  }
}

template <bool kMax>
void arg(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  std::vector<bool> red(size_t(x.dim()), false);
  if (x.dim() > 0) red[size_t(ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()))] = true;
  ReducePlan p;
  SPORE_CHECK(make_reduce_plan(x.shape(), x.strides(), red, p), "[GPU] ", ctx.def.name,
              ": the input has more than ", kReduceMaxDims,
              " separate dims; make it contiguous first");
  const Launch1d l = launch_1d(p.warp ? p.nout * 32 : p.nout);
  cudaStream_t s = native(ctx.stream->native_handle());
  visit(x.dtype(), ctx.def.name, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<
        std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float,
        std::conditional_t<std::is_same_v<T, bool> || sizeof(T) < 4, int32_t, T>>;
    arg_kernel<kMax, T, A><<<l.blocks, l.threads, 0, s>>>(static_cast<const T*>(x.data_ptr()), p,
                                                          static_cast<int64_t*>(out.data_ptr()));
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- softmax ------------------------------------------------------------------------------------
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
    case kFloat32:
      softmax_kernel<float, Log>
          <<<l.blocks, l.threads, 0, s>>>(static_cast<float*>(out.data_ptr()),
                                          static_cast<const float*>(x.data_ptr()), rows, n, inner);
      break;
    case kFloat16:
      softmax_kernel<__half, Log>
          <<<l.blocks, l.threads, 0, s>>>(static_cast<__half*>(out.data_ptr()),
                                          static_cast<const __half*>(x.data_ptr()), rows, n, inner);
      break;
    case kBFloat16:
      softmax_kernel<__nv_bfloat16, Log><<<l.blocks, l.threads, 0, s>>>(
          static_cast<__nv_bfloat16*>(out.data_ptr()),
          static_cast<const __nv_bfloat16*>(x.data_ptr()), rows, n, inner);
      break;
    case kFloat64:
      softmax_kernel<double, Log>
          <<<l.blocks, l.threads, 0, s>>>(static_cast<double*>(out.data_ptr()),
                                          static_cast<const double*>(x.data_ptr()), rows, n, inner);
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] softmax: no kernel for ", dtype_name(x.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

#define SPORE_REDUCE_DTYPES \
  kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
SPORE_KERNEL(GPU, Sum, sum, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(GPU, Mean, mean, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(GPU, Prod, prod, kUInt8, kInt8, kInt32, kInt64, kFloat32, kFloat64);
SPORE_KERNEL(GPU, Max, extremum<MaxOp>, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(GPU, Min, extremum<MinOp>, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(GPU, Argmax, arg<true>, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(GPU, Argmin, arg<false>, SPORE_REDUCE_DTYPES);
#undef SPORE_REDUCE_DTYPES
SPORE_KERNEL(GPU, Softmax, softmax<false>, kFloat32, kFloat16, kBFloat16, kFloat64);
SPORE_KERNEL(GPU, LogSoftmax, softmax<true>, kFloat32, kFloat16, kBFloat16, kFloat64);

}  // namespace spore::cuda
