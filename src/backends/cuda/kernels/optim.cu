// Optimizer updates on the GPU, in place (float32 / float64), the CPU kernels' formulas in their
// order (backends/cpu/kernels/optim_update.cpp says what each op computes):
//   ApplyMomentum / FusedApplyMomentum, ApplyAdam / FusedApplyAdam, ApplyRMSProp.
// The fused ops (Graph mode's optimizer fusion) and the single ones share one multi-tensor kernel:
// up to kGroups (param, state..., grad) groups per launch, their elements concatenated, each thread
// finding its group by a binary search over the groups' starts, so many small tensors cost one
// launch. A group with a strided operand runs alone through the strided kernel.
// With attr hyper_input the last input is a float64 (k) device tensor of per-step scalars
// (Momentum / RMSProp [lr], Adam [lr, step, eps]); the kernels read it on the device, so a
// compiled step never copies a learning rate to the GPU. With attr gated its last element is the
// gate, read on the device too: 0 leaves every operand untouched (an overflowed loss-scaled step
// skipped without the host deciding). AllFinite is here too (amp's overflow
// check over every gradient): a flag cleared by any thread that sees an inf or NaN.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "ops/op.h"

namespace spore::cuda {
namespace {

// ---- coefficients: from the attributes, per-step ones optionally from the hyper input ---------
struct MomentumAttrs {
  double lr, momentum, weight_decay;
  bool nesterov;
};
struct AdamAttrs {
  double lr, beta1, beta2, eps, weight_decay, step;
  bool decoupled;
};
struct RmsAttrs {
  double lr, decay, momentum, eps;
};
struct Hyper {
  const double* p = nullptr;  // device pointer, or null: the attributes hold the values
  int64_t stride = 1;
  int64_t size = 0;              // Momentum's may be [lr] or [lr, momentum]
  const double* gate = nullptr;  // attr gated: the element after them; 0 skips the update
  __device__ double at(int i, double fallback) const { return p ? p[i * stride] : fallback; }
  __device__ bool skipped() const { return gate && *gate == 0; }
};

// AdamCoeffs of the CPU kernel, from doubles, on the host or the device.
struct AdamCoeffs {
  double step_size, inv_sqrt_bc2, eps, beta1, beta2, one_b1, one_b2, l2, shrink;
};
__host__ __device__ inline AdamCoeffs adam_coeffs(const AdamAttrs& a, double lr, double step,
                                                  double eps) {
  const double bc1 = 1 - pow(a.beta1, step), bc2 = 1 - pow(a.beta2, step);
  return {lr / bc1,
          1 / sqrt(bc2),
          eps,
          a.beta1,
          a.beta2,
          1 - a.beta1,
          1 - a.beta2,
          a.decoupled ? 0.0 : a.weight_decay,
          a.decoupled ? 1 - lr * a.weight_decay : 1.0};
}

// One element's update: p, state..., g by reference (the grad is not written back).
template <class T>
struct MomentumFn {
  MomentumAttrs a;
  Hyper h;
  __device__ void operator()(T* const* ptr, int64_t const* off) const {
    if (h.skipped()) return;
    const T l = T(h.at(0, a.lr)), m = T(h.size >= 2 ? h.at(1, a.momentum) : a.momentum),
            w = T(a.weight_decay);
    T& p = ptr[0][off[0]];
    T& acc = ptr[1][off[1]];
    T g = ptr[2][off[2]];
    if (a.nesterov) {
      g = g + w * p;
      acc = m * acc + g;
      p -= l * (g + m * acc);
    } else {
      acc = m * acc + (g + w * p);
      p -= l * acc;
    }
  }
};
template <class T>
struct AdamFn {
  AdamAttrs a;
  Hyper h;
  __device__ void operator()(T* const* ptr, int64_t const* off) const {
    if (h.skipped()) return;
    const AdamCoeffs c = adam_coeffs(a, h.at(0, a.lr), h.at(1, a.step), h.at(2, a.eps));
    T& p = ptr[0][off[0]];
    T& m = ptr[1][off[1]];
    T& v = ptr[2][off[2]];
    const T g = ptr[3][off[3]] + T(c.l2) * p;
    p *= T(c.shrink);
    m = T(c.beta1) * m + T(c.one_b1) * g;
    v = T(c.beta2) * v + (T(c.one_b2) * g) * g;
    p -= (T(c.step_size) * m) / (sqrt(v) * T(c.inv_sqrt_bc2) + T(c.eps));
  }
};
template <class T>
struct RmsFn {
  RmsAttrs a;
  Hyper h;
  __device__ void operator()(T* const* ptr, int64_t const* off) const {
    if (h.skipped()) return;
    const T l = T(h.at(0, a.lr)), d = T(a.decay), one_d = T(1 - a.decay), m = T(a.momentum),
            e = T(a.eps);
    T& p = ptr[0][off[0]];
    T& ms = ptr[1][off[1]];
    T& mom = ptr[2][off[2]];
    const T g = ptr[3][off[3]];
    ms = d * ms + one_d * g * g;
    mom = m * mom + l * g / sqrt(ms + e);
    p -= mom;
  }
};

// ---- the multi-tensor kernel over contiguous groups ---------------------------------------------
constexpr int kGroups = 24;
template <int N, class T>
struct Groups {
  T* ptr[kGroups][N];
  int64_t start[kGroups + 1];  // prefix sums of the groups' element counts
  int count = 0;
};

template <int N, class T, class F>
__global__ void multi_kernel(Groups<N, T> gs, F f) {
  const int64_t total = gs.start[gs.count];
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int lo = 0, hi = gs.count - 1;  // the group with start[g] <= i < start[g + 1]
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (gs.start[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int64_t j = i - gs.start[lo];
    int64_t off[N];
    for (int k = 0; k < N; ++k) off[k] = j;
    f(gs.ptr[lo], off);
  }
}

// One group with any strides (same shape).
template <int N, class T, class F>
__global__ void strided_kernel(Groups<N, T> one, StridedIndex<N> ix, int64_t n, F f) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[N];
    for (int k = 0; k < N; ++k) off[k] = 0;
    int64_t q = i;
    for (int d = ix.ndim - 1; d >= 0; --d) {
      const int64_t c = q % ix.size[d];
      q /= ix.size[d];
      for (int k = 0; k < N; ++k) off[k] += c * ix.stride[k][d];
    }
    f(one.ptr[0], off);
  }
}

template <class T>
T* data(const Tensor& t) {
  return static_cast<T*>(const_cast<void*>(t.data_ptr()));
}

// Runs f over `groups` groups laid out as ops.def lists them (all params, then all first states,
// ..., then all grads: operand k of group t is inputs[k * groups + t]).
template <int N, class T, class F>
void multi_update(const ops::KernelContext& ctx, size_t groups, const F& f) {
  cudaStream_t s = native(ctx.stream->native_handle());
  auto operand = [&](size_t t, int k) -> const Tensor& {
    return ctx.inputs[size_t(k) * groups + t];
  };
  Groups<N, T> batch;
  batch.start[0] = 0;
  auto flush = [&] {
    if (batch.count == 0 || batch.start[batch.count] == 0) {
      batch.count = 0;
      return;
    }
    const Launch1d l = launch_1d(batch.start[batch.count]);
    multi_kernel<N, T, F><<<l.blocks, l.threads, 0, s>>>(batch, f);
    SPORE_CUDA_CHECK_LAUNCH();
    batch.count = 0;
  };
  for (size_t t = 0; t < groups; ++t) {
    const Tensor& p = operand(t, 0);
    const int64_t n = p.numel();
    if (n == 0) continue;
    bool contiguous = true;
    for (int k = 0; k < N; ++k) contiguous = contiguous && operand(t, k).is_contiguous();
    if (!contiguous) {
      const Tensor* in[N];
      for (int k = 0; k < N; ++k) in[k] = &operand(t, k);
      int64_t strides[N][kMaxDims * 2] = {};
      SPORE_CHECK(p.dim() <= 2 * kMaxDims, "[GPU] ", ctx.def.name, ": at most ", 2 * kMaxDims,
                  " dims");
      for (int k = 0; k < N; ++k)
        for (int64_t d = 0; d < p.dim(); ++d) strides[k][d] = in[k]->strides()[size_t(d)];
      StridedIndex<N> ix;
      SPORE_CHECK(make_index<N>(p.shape().data(), int(p.dim()), strides, ix), "[GPU] ",
                  ctx.def.name, ": operands with too many separate dims; make them contiguous");
      Groups<N, T> one;
      for (int k = 0; k < N; ++k) one.ptr[0][k] = data<T>(*in[k]);
      one.count = 1;
      const Launch1d l = launch_1d(n);
      strided_kernel<N, T, F><<<l.blocks, l.threads, 0, s>>>(one, ix, n, f);
      SPORE_CUDA_CHECK_LAUNCH();
      continue;
    }
    for (int k = 0; k < N; ++k) batch.ptr[batch.count][k] = data<T>(operand(t, k));
    batch.start[batch.count + 1] = batch.start[batch.count] + n;
    ++batch.count;
    if (batch.count == kGroups) {
      flush();
      batch.start[0] = 0;
    }
  }
  flush();
}

Hyper hyper_of(const ops::KernelContext& ctx) {
  Hyper h;
  if (!ctx.attrs.get_bool("hyper_input", false)) return h;
  const Tensor& t = ctx.inputs.back();  // float64 (k) on this device, checked by the inference rule
  h.p = static_cast<const double*>(t.data_ptr());
  h.stride = t.strides()[0];
  h.size = t.size(0);
  if (ctx.attrs.get_bool("gated", false)) h.gate = h.p + --h.size * h.stride;
  return h;
}

MomentumAttrs momentum_attrs(const ops::Attrs& a, const Hyper& h) {
  return {h.p ? 0.0 : a.get_float("lr"), h.size >= 2 ? 0.0 : a.get_float("momentum"),
          a.get_float("weight_decay", 0.0), a.get_bool("nesterov", false)};
}
AdamAttrs adam_attrs(const ops::Attrs& a, const Hyper& h, const char* who) {
  AdamAttrs r{h.p ? 0.0 : a.get_float("lr"),    a.get_float("beta1", 0.9),
              a.get_float("beta2", 0.999),      h.p ? 0.0 : a.get_float("eps", 1e-8),
              a.get_float("weight_decay", 0.0), h.p ? 1.0 : double(a.get_int("step", 1)),
              a.get_bool("decoupled", false)};
  // (With the hyper input the step is on the device: its check is the CPU path's and the op's.)
  SPORE_CHECK(r.step >= 1, "[", who, "] step is 1-based, got ", r.step);
  return r;
}

template <class F>
void visit_f32_f64(DType t, F&& f) {
  if (t == kFloat64)
    f(double{});
  else
    f(float{});
}

void apply_momentum(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx);
  const MomentumAttrs a = momentum_attrs(ctx.attrs, h);
  const size_t groups =
      ctx.def.id == ops::OpId::ApplyMomentum ? 1 : (ctx.inputs.size() - (h.p ? 1 : 0)) / 3;
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<3, T>(ctx, groups, MomentumFn<T>{a, h});
  });
}

void apply_adam(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx);
  const AdamAttrs a = adam_attrs(ctx.attrs, h, ctx.def.name);
  const size_t groups =
      ctx.def.id == ops::OpId::ApplyAdam ? 1 : (ctx.inputs.size() - (h.p ? 1 : 0)) / 4;
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<4, T>(ctx, groups, AdamFn<T>{a, h});
  });
}

void apply_rms_prop(ops::KernelContext& ctx) {
  const Hyper h = hyper_of(ctx);
  const auto& at = ctx.attrs;
  const RmsAttrs a{h.p ? 0.0 : at.get_float("lr"), at.get_float("decay", 0.9),
                   at.get_float("momentum", 0.0), at.get_float("eps", 1e-10)};
  visit_f32_f64(ctx.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    multi_update<4, T>(ctx, 1, RmsFn<T>{a, h});
  });
}

// ---- all_finite ---------------------------------------------------------------------------------
// A float is inf or NaN exactly when its exponent bits are all ones: tested on the raw bits.
template <class U>
__global__ void finite_kernel(const U* x, int64_t n, U mask, bool* ok) {
  bool bad = false;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    bad |= (x[i] & mask) == mask;
  if (__syncthreads_or(bad) && threadIdx.x == 0) *ok = false;  // every writer writes false: no race
}

void all_finite(ops::KernelContext& ctx) {
  bool* ok = static_cast<bool*>(ctx.outputs[0].data_ptr());
  cudaStream_t s = native(ctx.stream->native_handle());
  SPORE_CUDA_CHECK(cudaMemsetAsync(ok, 1, 1, s));
  for (const Tensor& in : ctx.inputs) {
    if (!is_floating(in.dtype()) || in.numel() == 0) continue;
    const Tensor x = in.contiguous();  // a copy kernel on this device when strided
    const int64_t n = x.numel();
    const Launch1d l = launch_1d(n, 4);
    switch (itemsize(x.dtype())) {
      case 2: {
        const uint16_t mask = x.dtype() == kFloat16 ? 0x7C00 : 0x7F80;
        finite_kernel<uint16_t><<<l.blocks, l.threads, 0, s>>>(
            static_cast<const uint16_t*>(x.data_ptr()), n, mask, ok);
        break;
      }
      case 4:
        finite_kernel<uint32_t><<<l.blocks, l.threads, 0, s>>>(
            static_cast<const uint32_t*>(x.data_ptr()), n, 0x7F800000u, ok);
        break;
      case 8:
        finite_kernel<uint64_t><<<l.blocks, l.threads, 0, s>>>(
            static_cast<const uint64_t*>(x.data_ptr()), n, 0x7FF0000000000000ull, ok);
        break;
      default:
        SPORE_THROW(ErrorKind::TypeError, "[GPU] all_finite: unsupported dtype ",
                    dtype_name(x.dtype()));
    }
    SPORE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

SPORE_KERNEL(GPU, ApplyMomentum, apply_momentum, kFloat32, kFloat64);
SPORE_KERNEL(GPU, FusedApplyMomentum, apply_momentum, kFloat32, kFloat64);
SPORE_KERNEL(GPU, ApplyAdam, apply_adam, kFloat32, kFloat64);
SPORE_KERNEL(GPU, FusedApplyAdam, apply_adam, kFloat32, kFloat64);
SPORE_KERNEL(GPU, ApplyRMSProp, apply_rms_prop, kFloat32, kFloat64);
SPORE_KERNEL(GPU, AllFinite, all_finite, kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16,
             kFloat32, kFloat64);

}  // namespace spore::cuda
