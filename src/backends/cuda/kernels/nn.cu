// Normalisation and loss kernels on the GPU, the CPU kernels' formulas (backends/cpu/kernels/
// nn_norm.cpp, softmax_cross_entropy.cpp):
//   SoftmaxCrossEntropyFused  per row of logits (N, C): loss = (m + log s) - z[label],
//                             dlogits = exp(z - m) / s - onehot(label); one warp per row
//   LayerNorm                 per row of the normalized D elements: mean, rstd = 1 / sqrt(var +
//   eps),
//                             y = (x - mean) * rstd * gamma + beta; one warp per row
//   LayerNormBackward         dx per row (a warp), dgamma / dbeta per column (a column of
//                             threads summing the rows, then a shared-memory sum)
//   BatchNorm (+ Backward, Inference)  per channel of (N, C, spatial...): one block per channel,
//                             float64 sums as the CPU's; the inference form is elementwise
// float16 / bfloat16 compute in float32; statistics are float32 (float64 for float64), as the op
// says. A label out of range gives a NaN loss on the GPU (the CPU throws: checking needs a host
// synchronisation).
#include "backends/cuda/kernels/common.cuh"
#include "spore/grad_mode.h"

namespace spore::cuda {
namespace {

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int k = 16; k > 0; k /= 2) v += __shfl_xor_sync(0xffffffffu, v, k);
  return v;
}
template <class A>
__device__ __forceinline__ A warp_max(A v) {
  for (int k = 16; k > 0; k /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, k));
  return v;
}

#define SPORE_WARP_LOOP(w, n)                                                      \
  for (int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < (n); \
       w += int64_t(gridDim.x) * blockDim.x / 32)

// ---- softmax cross-entropy ----------------------------------------------------------------------
template <class T, class L>
__global__ void sce_kernel(T* loss, T* dl, const T* z, const L* labels, int64_t rows, int64_t C,
                           int64_t s0, int64_t s1, int64_t sl, BadValue* bad) {
  using A = calc_t<T>;
  const int lane = threadIdx.x % 32;
  SPORE_WARP_LOOP(r, rows) {
    const T* zr = z + r * s0;
    A m = A(-INFINITY);
    for (int64_t i = lane; i < C; i += 32) m = max(m, cvt<A>(zr[i * s1]));
    m = warp_max(m);
    if (isinf(m) && m < 0) m = 0;  // all -inf: NaN as the unfused ops
    A s = 0;
    for (int64_t i = lane; i < C; i += 32) s += exp(cvt<A>(zr[i * s1]) - m);
    s = warp_sum(s);
    const int64_t y = int64_t(labels[r * sl]);
    const bool ok = y >= 0 && y < C;
    if (!ok && lane == 0) report_bad_value(bad, kBadCrossEntropyLabel, y, C);
    const A inv = A(1) / s;
    for (int64_t i = lane; i < C; i += 32)
      dl[r * C + i] = cvt<T>(exp(cvt<A>(zr[i * s1]) - m) * inv - (i == y ? A(1) : A(0)));
    if (lane == 0) loss[r] = cvt<T>(ok ? A((m + log(s)) - cvt<A>(zr[y * s1])) : A(NAN));
  }
}

void softmax_cross_entropy(ops::KernelContext& ctx) {
  const Tensor &z = ctx.inputs[0], &labels = ctx.inputs[1];
  Tensor &loss = ctx.outputs[0], &dl = ctx.outputs[1];
  if (z.numel() == 0) return;
  const int64_t rows = z.size(0), C = z.size(1);
  const Launch1d l = launch_1d(rows * 32);
  visit_float(z.dtype(), "softmax_cross_entropy_fused", [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto ltag) {
      using L = decltype(ltag);
      sce_kernel<T, L><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(loss), data_of<T>(dl), data_of<T>(z), data_of<L>(labels), rows, C,
          z.strides()[0], z.strides()[1], labels.strides()[0], bad_value_slot(z.device().index));
    };
    if (labels.dtype() == kInt32)
      run(int32_t{});
    else
      run(int64_t{});
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- layer norm ---------------------------------------------------------------------------------
// x, y contiguous (rows, D); gamma / beta contiguous (D) in the statistics' type A.
template <class T, class A>
__global__ void layer_norm_kernel(T* y, A* mean, A* rstd, const T* x, const A* gamma, const A* beta,
                                  int64_t rows, int64_t D, double eps) {
  const int lane = threadIdx.x % 32;
  SPORE_WARP_LOOP(r, rows) {
    const T* xr = x + r * D;
    A s = 0;
    for (int64_t j = lane; j < D; j += 32) s += cvt<A>(xr[j]);
    const A m = warp_sum(s) / A(D);
    A ss = 0;
    for (int64_t j = lane; j < D; j += 32) {
      const A v = cvt<A>(xr[j]) - m;
      ss += v * v;
    }
    ss = warp_sum(ss);
    const A rs = A(1.0 / sqrt(double(ss) / double(D) + eps));
    if (lane == 0) mean[r] = m, rstd[r] = rs;
    T* yr = y + r * D;
    for (int64_t j = lane; j < D; j += 32)
      yr[j] = cvt<T>((cvt<A>(xr[j]) - m) * rs * gamma[j] + beta[j]);
  }
}

// dx per row: a = sum(dy * gamma), c = sum(dy * gamma * xhat); dx = rstd (dy gamma - a/D - xhat
// c/D).
template <class T, class A>
__global__ void layer_norm_dx_kernel(T* dx, const T* dy, const T* x, const A* gamma, const A* mean,
                                     const A* rstd, int64_t rows, int64_t D) {
  const int lane = threadIdx.x % 32;
  SPORE_WARP_LOOP(r, rows) {
    const T *dr = dy + r * D, *xr = x + r * D;
    const A m = mean[r], rs = rstd[r];
    A a = 0, c = 0;
    for (int64_t j = lane; j < D; j += 32) {
      const A dg = cvt<A>(dr[j]) * gamma[j];
      a += dg;
      c += dg * ((cvt<A>(xr[j]) - m) * rs);
    }
    const A ma = warp_sum(a) / A(D), mc = warp_sum(c) / A(D);
    for (int64_t j = lane; j < D; j += 32) {
      const A xh = (cvt<A>(xr[j]) - m) * rs;
      dx[r * D + j] = cvt<T>(rs * (cvt<A>(dr[j]) * gamma[j] - ma - xh * mc));
    }
  }
}

// dgamma[j] = sum_r dy xhat, dbeta[j] = sum_r dy: blocks of 32 columns x 8 row groups.
template <class T, class A>
__global__ void layer_norm_dgamma_kernel(A* dgamma, A* dbeta, const T* dy, const T* x,
                                         const A* mean, const A* rstd, int64_t rows, int64_t D) {
  __shared__ A sg[8][33], sb[8][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  A g = 0, b = 0;
  if (j < D)
    for (int64_t r = threadIdx.y; r < rows; r += 8) {
      const A dv = cvt<A>(dy[r * D + j]);
      g += dv * ((cvt<A>(x[r * D + j]) - mean[r]) * rstd[r]);
      b += dv;
    }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && j < D) {
    for (int k = 1; k < 8; ++k) g += sg[k][threadIdx.x], b += sb[k][threadIdx.x];
    dgamma[j] = g;
    dbeta[j] = b;
  }
}

// t as a contiguous tensor of dtype dt on its device (a cast / copy kernel when it is not already).
Tensor dense_as(const Tensor& t, DType dt) {
  NoGradGuard no_grad;
  Tensor r = t.dtype() == dt ? t : t.to(dt);
  return r.contiguous();
}

DType stats_dtype(DType x) { return x == kFloat64 ? kFloat64 : kFloat32; }

void layer_norm(ops::KernelContext& ctx) {
  const Tensor x = dense_as(ctx.inputs[0], ctx.inputs[0].dtype());
  const DType sd = stats_dtype(x.dtype());
  const Tensor gamma = dense_as(ctx.inputs[1], sd), beta = dense_as(ctx.inputs[2], sd);
  const int64_t D = gamma.numel(), rows = D ? x.numel() / D : 0;
  if (rows == 0) return;
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  const Launch1d l = launch_1d(rows * 32);
  visit_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    layer_norm_kernel<T, A><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(ctx.outputs[0]), data_of<A>(ctx.outputs[1]), data_of<A>(ctx.outputs[2]),
        data_of<T>(x), data_of<A>(gamma), data_of<A>(beta), rows, D, eps);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void layer_norm_backward(ops::KernelContext& ctx) {
  const Tensor x = dense_as(ctx.inputs[1], ctx.inputs[1].dtype());
  const DType sd = stats_dtype(x.dtype());
  const Tensor dy = dense_as(ctx.inputs[0], x.dtype()), gamma = dense_as(ctx.inputs[2], sd),
               mean = dense_as(ctx.inputs[3], sd), rstd = dense_as(ctx.inputs[4], sd);
  const int64_t D = gamma.numel(), rows = D ? x.numel() / D : 0;
  Tensor &dgamma_out = ctx.outputs[1], &dbeta_out = ctx.outputs[2];
  // dgamma / dbeta in the statistics' type, cast into the outputs (gamma's dtype) when that
  // differs.
  const bool direct = dgamma_out.dtype() == sd && dbeta_out.dtype() == sd;
  const Tensor dgamma = direct ? dgamma_out : Tensor::empty({D}, sd, x.device()),
               dbeta = direct ? dbeta_out : Tensor::empty({D}, sd, x.device());
  if (rows == 0) {
    SPORE_CUDA_CHECK(cudaMemsetAsync(dgamma.data_ptr(), 0, dgamma.nbytes(), stream_of(ctx)));
    SPORE_CUDA_CHECK(cudaMemsetAsync(dbeta.data_ptr(), 0, dbeta.nbytes(), stream_of(ctx)));
  } else {
    const Launch1d l = launch_1d(rows * 32);
    visit_float(x.dtype(), "layer_norm_backward", [&](auto tag) {
      using T = decltype(tag);
      using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
      layer_norm_dx_kernel<T, A><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(ctx.outputs[0]), data_of<T>(dy), data_of<T>(x), data_of<A>(gamma),
          data_of<A>(mean), data_of<A>(rstd), rows, D);
      SPORE_CUDA_CHECK_LAUNCH();
      const dim3 block(32, 8), grid(unsigned((D + 31) / 32));
      layer_norm_dgamma_kernel<T, A><<<grid, block, 0, stream_of(ctx)>>>(
          data_of<A>(dgamma), data_of<A>(dbeta), data_of<T>(dy), data_of<T>(x), data_of<A>(mean),
          data_of<A>(rstd), rows, D);
    });
    SPORE_CUDA_CHECK_LAUNCH();
  }
  if (!direct) {
    NoGradGuard no_grad;
    ops::call(ops::OpId::Assign, {dgamma_out, dgamma});
    ops::call(ops::OpId::Assign, {dbeta_out, dbeta});
  }
}

// ---- batch norm: x (N, C, spatial...) ---------------------------------------------------------
// One block per channel walks its N x S elements (S contiguous per sample), sums in float64, as
// the CPU's per-channel double sums; gamma / beta / running stats arrive as float64.
constexpr int kBnThreads = 256;

__device__ __forceinline__ double block_sum(double v, double* shared) {
  for (int k = 16; k > 0; k /= 2) v += __shfl_xor_sync(0xffffffffu, v, k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // shared is reused between calls
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double t = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w) t += shared[w];
  return t;
}

template <class T, class A>
__global__ void batch_norm_kernel(T* y, A* mean_out, A* invstd_out, const T* x, const double* gamma,
                                  const double* beta, int64_t N, int64_t C, int64_t S, double eps) {
  __shared__ double shared[kBnThreads / 32];
  const int64_t c = blockIdx.x, count = N * S;
  auto at = [&](int64_t e) { return (e / S * C + c) * S + e % S; };
  double s = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) s += double(cvt<A>(x[at(e)]));
  const double mean = block_sum(s, shared) / double(count);
  const A m = A(mean);
  double ss = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const A v = cvt<A>(x[at(e)]) - m;
    ss += double(v * v);
  }
  const double invstd = 1.0 / sqrt(block_sum(ss, shared) / double(count) + eps);
  if (threadIdx.x == 0) mean_out[c] = A(mean), invstd_out[c] = A(invstd);
  const A scale = A(invstd * gamma[c]), shift = A(beta[c] - mean * invstd * gamma[c]);
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x)
    y[at(e)] = cvt<T>(cvt<A>(x[at(e)]) * scale + shift);
}

template <class T, class A>
__global__ void batch_norm_backward_kernel(T* dx, double* dgamma, double* dbeta, const T* dy,
                                           const T* x, const double* gamma, const A* mean,
                                           const A* invstd, int64_t N, int64_t C, int64_t S) {
  __shared__ double shared[kBnThreads / 32];
  const int64_t c = blockIdx.x, count = N * S;
  auto at = [&](int64_t e) { return (e / S * C + c) * S + e % S; };
  const A m = mean[c], is = invstd[c];
  double a = 0, b = 0;  // sum(dy), sum(dy * (x - mean))
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const A g = cvt<A>(dy[at(e)]);
    a += double(g);
    b += double(g * (cvt<A>(x[at(e)]) - m));
  }
  const double sdy = block_sum(a, shared), sdyx = block_sum(b, shared);
  if (threadIdx.x == 0) dbeta[c] = sdy, dgamma[c] = sdyx * double(is);
  // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
  const double n = double(count);
  const A k = A(gamma[c] * double(is)), mdy = A(sdy / n),
          kx = A(sdyx / n * double(is) * double(is));
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t o = at(e);
    dx[o] = cvt<T>(k * (cvt<A>(dy[o]) - mdy - (cvt<A>(x[o]) - m) * kx));
  }
}

template <class T, class A>
__global__ void batch_norm_inference_kernel(T* y, const T* x, const double* gamma,
                                            const double* beta, const double* mean,
                                            const double* var, int64_t n, int64_t C, int64_t S,
                                            double eps) {
  SPORE_GRID_LOOP(i, n) {
    const int64_t c = (i / S) % C;
    const double k = gamma[c] / sqrt(var[c] + eps);
    y[i] = cvt<T>(cvt<A>(x[i]) * A(k) + A(beta[c] - mean[c] * k));
  }
}

struct NCS {
  int64_t N, C, S;
};
NCS ncs(const Tensor& x) {
  int64_t S = 1;
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  return {x.size(0), x.size(1), S};
}

void check_plain(const ops::KernelContext& ctx) {
  SPORE_CHECK(!ctx.attrs.get_bool("blocked", false), "[GPU] ", ctx.def.name,
              ": the blocked (nChw16c) layout is the CPU's");
}

void batch_norm(ops::KernelContext& ctx) {
  check_plain(ctx);
  const Tensor x = dense_as(ctx.inputs[0], ctx.inputs[0].dtype());
  const Tensor gamma = dense_as(ctx.inputs[1], kFloat64), beta = dense_as(ctx.inputs[2], kFloat64);
  const NCS d = ncs(x);
  if (d.C == 0) return;
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  visit_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    batch_norm_kernel<T, A><<<unsigned(d.C), kBnThreads, 0, stream_of(ctx)>>>(
        data_of<T>(ctx.outputs[0]), data_of<A>(ctx.outputs[1]), data_of<A>(ctx.outputs[2]),
        data_of<T>(x), data_of<double>(gamma), data_of<double>(beta), d.N, d.C, d.S, eps);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward(ops::KernelContext& ctx) {
  check_plain(ctx);
  const Tensor x = dense_as(ctx.inputs[1], ctx.inputs[1].dtype());
  const DType sd = stats_dtype(x.dtype());
  const Tensor dy = dense_as(ctx.inputs[0], x.dtype()), gamma = dense_as(ctx.inputs[2], kFloat64),
               mean = dense_as(ctx.inputs[3], sd), invstd = dense_as(ctx.inputs[4], sd);
  const NCS d = ncs(x);
  if (d.C == 0) return;
  const Tensor dgamma = Tensor::empty({d.C}, kFloat64, x.device()),
               dbeta = Tensor::empty({d.C}, kFloat64, x.device());
  visit_float(x.dtype(), "batch_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    batch_norm_backward_kernel<T, A><<<unsigned(d.C), kBnThreads, 0, stream_of(ctx)>>>(
        data_of<T>(ctx.outputs[0]), data_of<double>(dgamma), data_of<double>(dbeta), data_of<T>(dy),
        data_of<T>(x), data_of<double>(gamma), data_of<A>(mean), data_of<A>(invstd), d.N, d.C, d.S);
  });
  SPORE_CUDA_CHECK_LAUNCH();
  NoGradGuard no_grad;  // into the outputs' dtype (gamma's)
  ops::call(ops::OpId::Assign, {ctx.outputs[1], dgamma});
  ops::call(ops::OpId::Assign, {ctx.outputs[2], dbeta});
}

void batch_norm_inference(ops::KernelContext& ctx) {
  check_plain(ctx);
  const Tensor x = dense_as(ctx.inputs[0], ctx.inputs[0].dtype());
  const Tensor gamma = dense_as(ctx.inputs[1], kFloat64), beta = dense_as(ctx.inputs[2], kFloat64),
               mean = dense_as(ctx.inputs[3], kFloat64), var = dense_as(ctx.inputs[4], kFloat64);
  const NCS d = ncs(x);
  const int64_t n = x.numel();
  if (n == 0) return;
  const double eps = ctx.attrs.get_float("eps", 1e-5);
  const Launch1d l = launch_1d(n);
  visit_float(x.dtype(), "batch_norm_inference", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    batch_norm_inference_kernel<T, A><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(ctx.outputs[0]), data_of<T>(x), data_of<double>(gamma), data_of<double>(beta),
        data_of<double>(mean), data_of<double>(var), n, d.C, d.S, eps);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

SPORE_KERNEL(GPU, SoftmaxCrossEntropyFused, softmax_cross_entropy, kFloat32, kFloat64, kFloat16,
             kBFloat16);
SPORE_KERNEL(GPU, LayerNorm, layer_norm, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(GPU, LayerNormBackward, layer_norm_backward, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(GPU, BatchNorm, batch_norm, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(GPU, BatchNormBackward, batch_norm_backward, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(GPU, BatchNormInference, batch_norm_inference, kFloat32, kFloat64, kBFloat16,
             kFloat16);

}  // namespace spore::cuda
