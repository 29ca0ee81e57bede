// Elementwise CUDA kernels: unary and binary ops (numpy broadcasting, any strides), where, cast and
// copy. One grid-stride kernel per (op, dtype): the output is contiguous (the dispatcher allocates
// it), each input is read through its own strides; a fully contiguous call skips the index
// arithmetic and, when aligned, moves 16 bytes per load and store. float16 / bfloat16 compute in
// float32, as the CPU kernels do.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/launch.h"
#include "ops/op.h"

namespace spore::cuda {
namespace {

// ---- types --------------------------------------------------------------------------------------
template <class T>
struct Compute {
  using type = T;
};
template <>
struct Compute<__half> {
  using type = float;
};
template <>
struct Compute<__nv_bfloat16> {
  using type = float;
};
template <class T>
using compute_t = typename Compute<T>::type;

template <class To, class From>
__device__ __forceinline__ To convert(From x) {
  if constexpr (std::is_same_v<To, __half>)
    return __float2half(float(x));
  else if constexpr (std::is_same_v<To, __nv_bfloat16>)
    return __float2bfloat16(float(x));
  else if constexpr (std::is_same_v<From, __half>)
    return To(__half2float(x));
  else if constexpr (std::is_same_v<From, __nv_bfloat16>)
    return To(__bfloat162float(x));
  else if constexpr (std::is_same_v<To, bool>)
    return x != From(0);
  else
    return To(x);
}

// ---- indexing -----------------------------------------------------------------------------------
template <int N>
__device__ __forceinline__ void offsets(const StridedIndex<N>& ix, int64_t i, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = ix.ndim - 1; d >= 0; --d) {
    const int64_t c = i % ix.size[d];
    i /= ix.size[d];
    for (int k = 0; k < N; ++k) off[k] += c * ix.stride[k][d];
  }
}

// Operand strides aligned to the output's rank (0 on broadcast and missing leading dims).
template <int N>
StridedIndex<N> index_for(const Tensor& out, const Tensor* const (&in)[N]) {
  const int rank = int(out.dim());
  SPORE_CHECK(rank <= 2 * kMaxDims, "[GPU] elementwise ops take at most ", 2 * kMaxDims,
              " dims, got ", rank);
  int64_t strides[N][kMaxDims * 2] = {};
  for (int k = 0; k < N; ++k) {
    const Tensor& t = *in[k];
    const int lead = rank - int(t.dim());
    for (int d = 0; d < int(t.dim()); ++d)
      strides[k][lead + d] = t.size(d) == 1 ? 0 : t.strides()[size_t(d)];
  }
  StridedIndex<N> ix;
  SPORE_CHECK(make_index<N>(out.shape().data(), rank, strides, ix),
              "[GPU] an elementwise op's operands have more "
              "than ",
              kMaxDims, " dims that cannot be merged; make them contiguous first");
  return ix;
}

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(const_cast<void*>(t.data_ptr()));
}

// ---- unary --------------------------------------------------------------------------------------
struct UnaryParams {  // doubles, as the CPU's functors keep them (float64 and int64 clamps)
  double a = 0, b = 0;
  bool has_a = false, has_b = false;
};

#define SPORE_UNARY(Name, expr)                                \
  struct Name {                                                \
    template <class C>                                         \
    __device__ C operator()(C x, const UnaryParams& p) const { \
      (void)p;                                                 \
      return expr;                                             \
    }                                                          \
  };
SPORE_UNARY(NegF, C(-x))
SPORE_UNARY(ExpF, C(exp(x)))
SPORE_UNARY(LogF, C(log(x)))
SPORE_UNARY(SqrtF, C(sqrt(x)))
SPORE_UNARY(RsqrtF, C(rsqrt(x)))
SPORE_UNARY(SinF, C(sin(x)))
SPORE_UNARY(CosF, C(cos(x)))
SPORE_UNARY(TanhF, C(tanh(x)))
SPORE_UNARY(SigmoidF, C(C(1) / (C(1) + exp(-x))))
SPORE_UNARY(LeakyReluF, x < C(0) ? C(x * C(p.a)) : x)
SPORE_UNARY(SiluF, C(x / (C(1) + exp(-x))))
SPORE_UNARY(GeluErfF, C(C(0.5) * x * (C(1) + erf(x * C(0.70710678118654752)))))
SPORE_UNARY(GeluTanhF,
            C(C(0.5) * x * (C(1) + tanh(C(0.79788456080286536) * (x + C(0.044715) * x * x * x)))))
SPORE_UNARY(SoftplusF, C(p.a) * x > C(p.b) ? x : C(log1p(exp(C(p.a) * x)) / C(p.a)))
SPORE_UNARY(FloorF, C(floor(x)))
SPORE_UNARY(CeilF, C(ceil(x)))
SPORE_UNARY(RoundF, C(rint(x)))  // half to even, as numpy
SPORE_UNARY(ErfF, C(erf(x)))
#undef SPORE_UNARY
// The CPU's rules (elementwise_unary.cpp): NaN passes through relu and sign, -0 through sign,
// fabs clears the sign of -0, unsigned types are their own abs / relu; the clamp compares in
// double (bounds outside the dtype's range never convert) and applies min, then max.
struct AbsF {
  template <class C>
  __device__ C operator()(C x, const UnaryParams&) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else if constexpr (std::is_floating_point_v<C>)
      return C(fabs(x));
    else
      return x < C(0) ? C(-x) : x;
  }
};
struct ReluF {
  template <class C>
  __device__ C operator()(C x, const UnaryParams&) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < C(0) ? C(0) : x;
  }
};
struct SignF {
  template <class C>
  __device__ C operator()(C x, const UnaryParams&) const {
    if constexpr (std::is_unsigned_v<C>)
      return C(x > C(0));
    else
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
  }
};
struct ClampF {
  template <class C>
  __device__ C operator()(C x, const UnaryParams& p) const {
    if (p.has_a && double(x) < p.a) x = C(p.a);
    if (p.has_b && double(x) > p.b) x = C(p.b);
    return x;
  }
};

// Functors defined on integers too (the rest are float-only: their switch skips integer types).
template <class F>
constexpr bool kIntegers = false;
template <>
constexpr bool kIntegers<NegF> = true;
template <>
constexpr bool kIntegers<AbsF> = true;
template <>
constexpr bool kIntegers<ReluF> = true;
template <>
constexpr bool kIntegers<SignF> = true;
template <>
constexpr bool kIntegers<ClampF> = true;

template <class F, class T>
__global__ void unary_kernel(T* out, const T* x, StridedIndex<1> ix, int64_t n, bool contiguous,
                             UnaryParams p) {
  using C = compute_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1] = {i};
    if (!contiguous) offsets<1>(ix, i, off);
    out[i] = convert<T>(F()(convert<C>(x[off[0]]), p));
  }
}

// The contiguous fast path: 16-byte loads and stores (4 floats, 8 halves, 2 doubles per thread and
// step) when both pointers are 16-byte aligned; the tail goes through the scalar kernel.
template <class T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};
template <class T>
constexpr int kPack = int(16 / sizeof(T));

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <class F, class T>
__global__ void unary_vec_kernel(Pack<T>* out, const Pack<T>* x, int64_t npack, UnaryParams p) {
  using C = compute_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < npack;
       i += int64_t(gridDim.x) * blockDim.x) {
    const Pack<T> a = x[i];
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k) r.v[k] = convert<T>(F()(convert<C>(a.v[k]), p));
    out[i] = r;
  }
}

template <class F, class T>
void launch_unary(T* out, const T* x, const StridedIndex<1>& ix, int64_t n, bool contiguous,
                  UnaryParams p, cudaStream_t s) {
  int64_t done = 0;
  if (contiguous && n >= kPack<T> && aligned16(out) && aligned16(x)) {
    const int64_t npack = n / kPack<T>;
    const Launch1d l = launch_1d(npack);
    unary_vec_kernel<F, T><<<l.blocks, l.threads, 0, s>>>(
        reinterpret_cast<Pack<T>*>(out), reinterpret_cast<const Pack<T>*>(x), npack, p);
    done = npack * kPack<T>;
    if (done == n) return;
  }
  const Launch1d l = launch_1d(n - done);
  unary_kernel<F, T>
      <<<l.blocks, l.threads, 0, s>>>(out + done, x + done, ix, n - done, contiguous, p);
}

template <class F>
void unary(ops::KernelContext& ctx, UnaryParams p = {}) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor* in[1] = {&x};
  const StridedIndex<1> ix = index_for<1>(out, in);
  const bool contiguous = ix.ndim <= 1 && (ix.ndim == 0 || ix.stride[0][0] == 1) && x.numel() == n;
  cudaStream_t s = native(ctx.stream->native_handle());
  switch (out.dtype()) {
    case kFloat32:
      launch_unary<F, float>(ptr<float>(out), ptr<float>(x), ix, n, contiguous, p, s);
      break;
    case kFloat16:
      launch_unary<F, __half>(ptr<__half>(out), ptr<__half>(x), ix, n, contiguous, p, s);
      break;
    case kBFloat16:
      launch_unary<F, __nv_bfloat16>(ptr<__nv_bfloat16>(out), ptr<__nv_bfloat16>(x), ix, n,
                                     contiguous, p, s);
      break;
    case kFloat64:
      launch_unary<F, double>(ptr<double>(out), ptr<double>(x), ix, n, contiguous, p, s);
      break;
    case kInt32:
    case kInt64:
    case kInt8:
    case kUInt8:
      if constexpr (kIntegers<F>) {
        if (out.dtype() == kInt32)
          launch_unary<F, int32_t>(ptr<int32_t>(out), ptr<int32_t>(x), ix, n, contiguous, p, s);
        else if (out.dtype() == kInt64)
          launch_unary<F, int64_t>(ptr<int64_t>(out), ptr<int64_t>(x), ix, n, contiguous, p, s);
        else if (out.dtype() == kInt8)
          launch_unary<F, int8_t>(ptr<int8_t>(out), ptr<int8_t>(x), ix, n, contiguous, p, s);
        else
          launch_unary<F, uint8_t>(ptr<uint8_t>(out), ptr<uint8_t>(x), ix, n, contiguous, p, s);
        break;
      }
      [[fallthrough]];
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] ", ctx.def.name, " has no kernel for ",
                  dtype_name(out.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

template <class F>
void unary_kernel_fn(ops::KernelContext& ctx) {
  unary<F>(ctx);
}

void leaky_relu(ops::KernelContext& ctx) {
  unary<LeakyReluF>(ctx, {ctx.attrs.get_float("alpha", 0.01)});
}
void softplus(ops::KernelContext& ctx) {
  unary<SoftplusF>(ctx, {ctx.attrs.get_float("beta", 1), ctx.attrs.get_float("threshold", 20)});
}
void clamp(ops::KernelContext& ctx) {
  UnaryParams p{ctx.attrs.get_float("min", 0), ctx.attrs.get_float("max", 0), ctx.attrs.has("min"),
                ctx.attrs.has("max")};
  unary<ClampF>(ctx, p);
}
void gelu(ops::KernelContext& ctx) {
  if (ctx.attrs.get_bool("approximate", false))
    unary<GeluTanhF>(ctx);
  else
    unary<GeluErfF>(ctx);
}

// ---- binary -------------------------------------------------------------------------------------
#define SPORE_BINARY(Name, R, expr)                   \
  struct Name {                                       \
    template <class C>                                \
    __device__ auto operator()(C a, C b) const -> R { \
      return expr;                                    \
    }                                                 \
  };
SPORE_BINARY(AddF, C, C(a + b))
SPORE_BINARY(SubF, C, C(a - b))
SPORE_BINARY(MulF, C, C(a* b))
SPORE_BINARY(DivF, C, C(a / b))
SPORE_BINARY(PowF, C, C(pow(a, b)))
SPORE_BINARY(MaximumF, C, (a > b || a != a) ? a : b)  // NaN wins, as numpy
SPORE_BINARY(MinimumF, C, (a < b || a != a) ? a : b)
SPORE_BINARY(ReluGradF, C, b > C(0) ? a : C(0))
SPORE_BINARY(EqualF, bool, a == b)
SPORE_BINARY(NotEqualF, bool, a != b)
SPORE_BINARY(LessF, bool, a < b)
SPORE_BINARY(LessEqualF, bool, a <= b)
SPORE_BINARY(GreaterF, bool, a > b)
SPORE_BINARY(GreaterEqualF, bool, a >= b)
SPORE_BINARY(LogicalAndF, bool, (a != C(0)) && (b != C(0)))
SPORE_BINARY(LogicalOrF, bool, (a != C(0)) || (b != C(0)))
SPORE_BINARY(LogicalXorF, bool, (a != C(0)) != (b != C(0)))
#undef SPORE_BINARY

template <class F, class T, class O>
__global__ void binary_kernel(O* out, const T* a, const T* b, StridedIndex<2> ix, int64_t n,
                              bool contiguous) {
  using C = compute_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2] = {i, i};
    if (!contiguous) offsets<2>(ix, i, off);
    out[i] = convert<O>(F()(convert<C>(a[off[0]]), convert<C>(b[off[1]])));
  }
}

template <class F, class T>
__global__ void binary_vec_kernel(Pack<T>* out, const Pack<T>* a, const Pack<T>* b, int64_t npack) {
  using C = compute_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < npack;
       i += int64_t(gridDim.x) * blockDim.x) {
    const Pack<T> x = a[i], y = b[i];
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kPack<T>; ++k)
      r.v[k] = convert<T>(F()(convert<C>(x.v[k]), convert<C>(y.v[k])));
    out[i] = r;
  }
}

// Same-dtype results: the 16-byte path when everything is contiguous and aligned.
template <class F, class T>
void launch_binary(T* out, const T* a, const T* b, const StridedIndex<2>& ix, int64_t n,
                   bool contiguous, cudaStream_t s) {
  int64_t done = 0;
  if (contiguous && n >= kPack<T> && aligned16(out) && aligned16(a) && aligned16(b)) {
    const int64_t npack = n / kPack<T>;
    const Launch1d l = launch_1d(npack);
    binary_vec_kernel<F, T><<<l.blocks, l.threads, 0, s>>>(
        reinterpret_cast<Pack<T>*>(out), reinterpret_cast<const Pack<T>*>(a),
        reinterpret_cast<const Pack<T>*>(b), npack);
    done = npack * kPack<T>;
    if (done == n) return;
  }
  const Launch1d l = launch_1d(n - done);
  binary_kernel<F, T, T>
      <<<l.blocks, l.threads, 0, s>>>(out + done, a + done, b + done, ix, n - done, contiguous);
}

template <class F>
constexpr bool kFloatOnly = false;
template <>
constexpr bool kFloatOnly<DivF> = true;
template <>
constexpr bool kFloatOnly<PowF> = true;
template <>
constexpr bool kFloatOnly<ReluGradF> = true;

template <class F, class T>
void binary_typed(ops::KernelContext& ctx, const StridedIndex<2>& ix, int64_t n, bool contiguous,
                  cudaStream_t s) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  const Launch1d l = launch_1d(n);
  using R = decltype(F()(compute_t<T>(), compute_t<T>()));
  if constexpr (kFloatOnly<F> && !std::is_floating_point_v<compute_t<T>>)
    SPORE_THROW(ErrorKind::TypeError, "[GPU] ", ctx.def.name, " takes floating tensors");
  else if constexpr (std::is_same_v<R, bool>)
    binary_kernel<F, T, bool>
        <<<l.blocks, l.threads, 0, s>>>(ptr<bool>(out), ptr<T>(a), ptr<T>(b), ix, n, contiguous);
  else
    launch_binary<F, T>(ptr<T>(out), ptr<T>(a), ptr<T>(b), ix, n, contiguous, s);
}

template <class F>
void binary(ops::KernelContext& ctx) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor* in[2] = {&a, &b};
  const StridedIndex<2> ix = index_for<2>(out, in);
  const bool contiguous =
      a.numel() == n && b.numel() == n && a.is_contiguous() && b.is_contiguous();
  cudaStream_t s = native(ctx.stream->native_handle());
  switch (a.dtype()) {
    case kFloat32:
      binary_typed<F, float>(ctx, ix, n, contiguous, s);
      break;
    case kFloat16:
      binary_typed<F, __half>(ctx, ix, n, contiguous, s);
      break;
    case kBFloat16:
      binary_typed<F, __nv_bfloat16>(ctx, ix, n, contiguous, s);
      break;
    case kFloat64:
      binary_typed<F, double>(ctx, ix, n, contiguous, s);
      break;
    case kInt32:
      binary_typed<F, int32_t>(ctx, ix, n, contiguous, s);
      break;
    case kInt64:
      binary_typed<F, int64_t>(ctx, ix, n, contiguous, s);
      break;
    case kUInt8:
      binary_typed<F, uint8_t>(ctx, ix, n, contiguous, s);
      break;
    case kInt8:
      binary_typed<F, int8_t>(ctx, ix, n, contiguous, s);
      break;
    case kBool:
      binary_typed<F, bool>(ctx, ix, n, contiguous, s);
      break;
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- where --------------------------------------------------------------------------------------
template <class T>
__global__ void where_kernel(T* out, const bool* c, const T* x, const T* y, StridedIndex<3> ix,
                             int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsets<3>(ix, i, off);
    out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <class T>
void where_typed(ops::KernelContext& ctx, const StridedIndex<3>& ix, int64_t n) {
  const Launch1d l = launch_1d(n);
  where_kernel<T><<<l.blocks, l.threads, 0, native(ctx.stream->native_handle())>>>(
      ptr<T>(ctx.outputs[0]), ptr<bool>(ctx.inputs[0]), ptr<T>(ctx.inputs[1]),
      ptr<T>(ctx.inputs[2]), ix, n);
}

void where(ops::KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor* in[3] = {&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]};
  const StridedIndex<3> ix = index_for<3>(out, in);
  switch (itemsize(out.dtype())) {  // a selection moves bytes: by width
    case 1:
      where_typed<uint8_t>(ctx, ix, n);
      break;
    case 2:
      where_typed<uint16_t>(ctx, ix, n);
      break;
    case 4:
      where_typed<uint32_t>(ctx, ix, n);
      break;
    case 8:
      where_typed<uint64_t>(ctx, ix, n);
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] where: unsupported dtype ", dtype_name(out.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- logical_not: any dtype -> bool -------------------------------------------------------------
template <class T>
__global__ void logical_not_kernel(bool* out, const T* x, StridedIndex<1> ix, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1];
    offsets<1>(ix, i, off);
    out[i] = convert<compute_t<T>>(x[off[0]]) == compute_t<T>(0);  // in its own type, as the CPU
  }
}

void logical_not(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor* in[1] = {&x};
  const StridedIndex<1> ix = index_for<1>(out, in);
  const Launch1d l = launch_1d(n);
  cudaStream_t s = native(ctx.stream->native_handle());
  bool* o = ptr<bool>(out);
  switch (x.dtype()) {
    case kFloat32:
      logical_not_kernel<float><<<l.blocks, l.threads, 0, s>>>(o, ptr<float>(x), ix, n);
      break;
    case kFloat16:
      logical_not_kernel<__half><<<l.blocks, l.threads, 0, s>>>(o, ptr<__half>(x), ix, n);
      break;
    case kBFloat16:
      logical_not_kernel<__nv_bfloat16>
          <<<l.blocks, l.threads, 0, s>>>(o, ptr<__nv_bfloat16>(x), ix, n);
      break;
    case kFloat64:
      logical_not_kernel<double><<<l.blocks, l.threads, 0, s>>>(o, ptr<double>(x), ix, n);
      break;
    case kInt32:
      logical_not_kernel<int32_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<int32_t>(x), ix, n);
      break;
    case kInt64:
      logical_not_kernel<int64_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<int64_t>(x), ix, n);
      break;
    case kUInt8:
      logical_not_kernel<uint8_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<uint8_t>(x), ix, n);
      break;
    case kInt8:
      logical_not_kernel<int8_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<int8_t>(x), ix, n);
      break;
    case kBool:
      logical_not_kernel<bool><<<l.blocks, l.threads, 0, s>>>(o, ptr<bool>(x), ix, n);
      break;
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- cast and copy ------------------------------------------------------------------------------
// A float out of an integer type's range (or NaN) has no defined conversion in C++; the CPU's
// (x86) conversions give the "integer indefinite" value INT_MIN / INT64_MIN, and 8-bit targets
// the low byte of the int32 conversion (-1.0 -> uint8 255, 200.0 -> int8 -56). The GPU's cvt
// saturates instead, so the CPU's rule is written out: casts agree on every input.
template <class To, class F>
__device__ __forceinline__ To float_to_int(F f) {
  if constexpr (sizeof(To) == 8) {
    return f >= F(-9223372036854775808.0) && f < F(9223372036854775808.0)
               ? To(f)
               : To(INT64_MIN);  // NaN fails both comparisons
  } else {
    const int32_t i = f >= F(-2147483648.0) && f < F(2147483648.0) ? int32_t(f) : INT32_MIN;
    return To(i);
  }
}

template <class To, class From>
__global__ void cast_kernel(To* out, const From* x, StridedIndex<1> ix, int64_t n) {
  using FromC = compute_t<From>;  // float for the 16-bit floats
  constexpr bool kFloatToInt =
      std::is_floating_point_v<FromC> && std::is_integral_v<To> && !std::is_same_v<To, bool>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1];
    offsets<1>(ix, i, off);
    const FromC v = convert<FromC>(x[off[0]]);
    if constexpr (std::is_same_v<To, bool>)
      out[i] = v != FromC(0);  // in the source's own type: 1e-300 is true
    else if constexpr (kFloatToInt)
      out[i] = float_to_int<To>(v);
    else
      out[i] = convert<To>(v);
  }
}

template <class To>
void cast_from(ops::KernelContext& ctx, const StridedIndex<1>& ix, int64_t n, cudaStream_t s) {
  const Tensor& x = ctx.inputs[0];
  To* o = ptr<To>(ctx.outputs[0]);
  const Launch1d l = launch_1d(n);
  switch (x.dtype()) {
    case kFloat32:
      cast_kernel<To, float><<<l.blocks, l.threads, 0, s>>>(o, ptr<float>(x), ix, n);
      break;
    case kFloat16:
      cast_kernel<To, __half><<<l.blocks, l.threads, 0, s>>>(o, ptr<__half>(x), ix, n);
      break;
    case kBFloat16:
      cast_kernel<To, __nv_bfloat16>
          <<<l.blocks, l.threads, 0, s>>>(o, ptr<__nv_bfloat16>(x), ix, n);
      break;
    case kFloat64:
      cast_kernel<To, double><<<l.blocks, l.threads, 0, s>>>(o, ptr<double>(x), ix, n);
      break;
    case kInt32:
      cast_kernel<To, int32_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<int32_t>(x), ix, n);
      break;
    case kInt64:
      cast_kernel<To, int64_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<int64_t>(x), ix, n);
      break;
    case kUInt8:
      cast_kernel<To, uint8_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<uint8_t>(x), ix, n);
      break;
    case kInt8:
      cast_kernel<To, int8_t><<<l.blocks, l.threads, 0, s>>>(o, ptr<int8_t>(x), ix, n);
      break;
    case kBool:
      cast_kernel<To, bool><<<l.blocks, l.threads, 0, s>>>(o, ptr<bool>(x), ix, n);
      break;
  }
}

void cast(ops::KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor* in[1] = {&ctx.inputs[0]};
  const StridedIndex<1> ix = index_for<1>(out, in);
  cudaStream_t s = native(ctx.stream->native_handle());
  switch (out.dtype()) {
    case kFloat32:
      cast_from<float>(ctx, ix, n, s);
      break;
    case kFloat16:
      cast_from<__half>(ctx, ix, n, s);
      break;
    case kBFloat16:
      cast_from<__nv_bfloat16>(ctx, ix, n, s);
      break;
    case kFloat64:
      cast_from<double>(ctx, ix, n, s);
      break;
    case kInt32:
      cast_from<int32_t>(ctx, ix, n, s);
      break;
    case kInt64:
      cast_from<int64_t>(ctx, ix, n, s);
      break;
    case kUInt8:
      cast_from<uint8_t>(ctx, ix, n, s);
      break;
    case kInt8:
      cast_from<int8_t>(ctx, ix, n, s);
      break;
    case kBool:
      cast_from<bool>(ctx, ix, n, s);
      break;
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

// Copy: a strided tensor into the contiguous output (same dtype); contiguous input: one memcpy.
void copy(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  cudaStream_t s = native(ctx.stream->native_handle());
  if (x.is_contiguous()) {
    SPORE_CUDA_CHECK(
        cudaMemcpyAsync(out.data_ptr(), x.data_ptr(), out.nbytes(), cudaMemcpyDeviceToDevice, s));
    return;
  }
  const Tensor* in[1] = {&x};
  const StridedIndex<1> ix = index_for<1>(out, in);
  const int64_t n = out.numel();
  const Launch1d l = launch_1d(n);
  switch (itemsize(out.dtype())) {
    case 1:
      cast_kernel<uint8_t, uint8_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint8_t>(out), ptr<uint8_t>(x), ix, n);
      break;
    case 2:
      cast_kernel<uint16_t, uint16_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint16_t>(out), ptr<uint16_t>(x), ix, n);
      break;
    case 4:
      cast_kernel<uint32_t, uint32_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint32_t>(out), ptr<uint32_t>(x), ix, n);
      break;
    case 8:
      cast_kernel<uint64_t, uint64_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint64_t>(out), ptr<uint64_t>(x), ix, n);
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] copy: unsupported dtype ", dtype_name(out.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

// Assign (dst <- src, in place): src broadcast to dst's shape and cast to its dtype; dst may be a
// strided view.
template <class D, class S>
__global__ void assign_kernel(D* dst, const S* src, StridedIndex<2> ix, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsets<2>(ix, i, off);
    const S v = src[off[1]];
    if constexpr (std::is_same_v<D, S>)
      dst[off[0]] = v;
    else if constexpr (std::is_same_v<D, bool>)
      dst[off[0]] = convert<float>(v) != 0.f;
    else if constexpr (std::is_same_v<S, __half> || std::is_same_v<S, __nv_bfloat16>)
      dst[off[0]] = convert<D>(convert<float>(v));
    else
      dst[off[0]] = convert<D>(v);
  }
}

void assign(ops::KernelContext& ctx) {
  const Tensor& dst = ctx.inputs[0];
  const Tensor& src = ctx.inputs[1];
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Tensor* in[2] = {&dst, &src};
  const StridedIndex<2> ix = index_for<2>(dst, in);
  const Launch1d l = launch_1d(n);
  cudaStream_t s = native(ctx.stream->native_handle());
  if (dst.dtype() == src.dtype()) {  // moves bytes: by width
    switch (itemsize(dst.dtype())) {
      case 1:
        assign_kernel<uint8_t, uint8_t>
            <<<l.blocks, l.threads, 0, s>>>(ptr<uint8_t>(dst), ptr<uint8_t>(src), ix, n);
        break;
      case 2:
        assign_kernel<uint16_t, uint16_t>
            <<<l.blocks, l.threads, 0, s>>>(ptr<uint16_t>(dst), ptr<uint16_t>(src), ix, n);
        break;
      case 4:
        assign_kernel<uint32_t, uint32_t>
            <<<l.blocks, l.threads, 0, s>>>(ptr<uint32_t>(dst), ptr<uint32_t>(src), ix, n);
        break;
      case 8:
        assign_kernel<uint64_t, uint64_t>
            <<<l.blocks, l.threads, 0, s>>>(ptr<uint64_t>(dst), ptr<uint64_t>(src), ix, n);
        break;
      default:
        SPORE_THROW(ErrorKind::TypeError, "[GPU] assign: unsupported dtype ",
                    dtype_name(dst.dtype()));
    }
  } else {
    visit_all(dst.dtype(), "assign", [&](auto dtag) {
      using D = decltype(dtag);
      visit_all(src.dtype(), "assign", [&](auto stag) {
        using S = decltype(stag);
        assign_kernel<D, S><<<l.blocks, l.threads, 0, s>>>(ptr<D>(dst), ptr<S>(src), ix, n);
      });
    });
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void copy_strided(const Tensor& dst, const Tensor& src, cudaStream_t s) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.is_contiguous() && src.is_contiguous()) {
    SPORE_CUDA_CHECK(
        cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, s));
    return;
  }
  const Tensor* in[2] = {&dst, &src};
  const StridedIndex<2> ix = index_for<2>(dst, in);
  const Launch1d l = launch_1d(n);
  switch (itemsize(dst.dtype())) {
    case 1:
      assign_kernel<uint8_t, uint8_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint8_t>(dst), ptr<uint8_t>(src), ix, n);
      break;
    case 2:
      assign_kernel<uint16_t, uint16_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint16_t>(dst), ptr<uint16_t>(src), ix, n);
      break;
    case 4:
      assign_kernel<uint32_t, uint32_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint32_t>(dst), ptr<uint32_t>(src), ix, n);
      break;
    case 8:
      assign_kernel<uint64_t, uint64_t>
          <<<l.blocks, l.threads, 0, s>>>(ptr<uint64_t>(dst), ptr<uint64_t>(src), ix, n);
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] copy: unsupported dtype ", dtype_name(dst.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

#define FLOATS kFloat32, kFloat16, kBFloat16, kFloat64
#define NUMERIC FLOATS, kInt32, kInt64
#define ALL NUMERIC, kUInt8, kInt8, kBool
SPORE_KERNEL(GPU, Neg, unary_kernel_fn<NegF>, NUMERIC, kInt8);  // the CPU's dtypes (SIGNED)
SPORE_KERNEL(GPU, Abs, unary_kernel_fn<AbsF>, NUMERIC, kInt8, kUInt8);
SPORE_KERNEL(GPU, Exp, unary_kernel_fn<ExpF>, FLOATS);
SPORE_KERNEL(GPU, Log, unary_kernel_fn<LogF>, FLOATS);
SPORE_KERNEL(GPU, Sqrt, unary_kernel_fn<SqrtF>, FLOATS);
SPORE_KERNEL(GPU, Rsqrt, unary_kernel_fn<RsqrtF>, FLOATS);
SPORE_KERNEL(GPU, Sin, unary_kernel_fn<SinF>, FLOATS);
SPORE_KERNEL(GPU, Cos, unary_kernel_fn<CosF>, FLOATS);
SPORE_KERNEL(GPU, Tanh, unary_kernel_fn<TanhF>, FLOATS);
SPORE_KERNEL(GPU, Sigmoid, unary_kernel_fn<SigmoidF>, FLOATS);
SPORE_KERNEL(GPU, Relu, unary_kernel_fn<ReluF>, NUMERIC, kInt8, kUInt8);
SPORE_KERNEL(GPU, LeakyRelu, leaky_relu, FLOATS);
SPORE_KERNEL(GPU, Silu, unary_kernel_fn<SiluF>, FLOATS);
SPORE_KERNEL(GPU, Gelu, gelu, FLOATS);
SPORE_KERNEL(GPU, Softplus, softplus, FLOATS);
SPORE_KERNEL(GPU, Clamp, clamp, NUMERIC, kInt8, kUInt8);
SPORE_KERNEL(GPU, Floor, unary_kernel_fn<FloorF>, FLOATS);
SPORE_KERNEL(GPU, Ceil, unary_kernel_fn<CeilF>, FLOATS);
SPORE_KERNEL(GPU, Round, unary_kernel_fn<RoundF>, FLOATS);
SPORE_KERNEL(GPU, Sign, unary_kernel_fn<SignF>, NUMERIC, kInt8, kUInt8);
SPORE_KERNEL(GPU, Erf, unary_kernel_fn<ErfF>, FLOATS);
SPORE_KERNEL(GPU, LogicalNot, logical_not, ALL);
SPORE_KERNEL(GPU, Add, binary<AddF>, ALL);
SPORE_KERNEL(GPU, Sub, binary<SubF>, NUMERIC, kInt8, kUInt8);
SPORE_KERNEL(GPU, Mul, binary<MulF>, ALL);
SPORE_KERNEL(GPU, Div, binary<DivF>, FLOATS);
SPORE_KERNEL(GPU, Pow, binary<PowF>, FLOATS);
SPORE_KERNEL(GPU, Maximum, binary<MaximumF>, ALL);
SPORE_KERNEL(GPU, Minimum, binary<MinimumF>, ALL);
SPORE_KERNEL(GPU, ReluGrad, binary<ReluGradF>, FLOATS);
SPORE_KERNEL(GPU, Equal, binary<EqualF>, ALL);
SPORE_KERNEL(GPU, NotEqual, binary<NotEqualF>, ALL);
SPORE_KERNEL(GPU, Less, binary<LessF>, ALL);
SPORE_KERNEL(GPU, LessEqual, binary<LessEqualF>, ALL);
SPORE_KERNEL(GPU, Greater, binary<GreaterF>, ALL);
SPORE_KERNEL(GPU, GreaterEqual, binary<GreaterEqualF>, ALL);
SPORE_KERNEL(GPU, LogicalAnd, binary<LogicalAndF>, ALL);
SPORE_KERNEL(GPU, LogicalOr, binary<LogicalOrF>, ALL);
SPORE_KERNEL(GPU, LogicalXor, binary<LogicalXorF>, ALL);
SPORE_KERNEL(GPU, Where, where, kBool);  // keyed on cond (bool); x's dtype is free
SPORE_KERNEL(GPU, Cast, cast, ALL);
SPORE_KERNEL(GPU, Copy, copy, ALL);
SPORE_KERNEL(GPU, Assign, assign, ALL);
#undef FLOATS
#undef NUMERIC
#undef ALL

}  // namespace spore::cuda
