// The emulated cuDNN: the legacy convolution calls the CUDA backend makes (kernels/conv.cpp),
// computed by direct loops in float (double for float64 data) as cuDNN defines them: NCHW,
// cross-correlation, one padding per axis, stride, dilation, groups; y = alpha conv(x, w) + beta y,
// and its data and filter gradients; AddTensor broadcasting A's size-1 dims over C. It checks
// what cuDNN checks (the output size the descriptors imply, channels and groups agreeing, the
// workspace the query asked for) and that every tensor lies inside a device allocation.
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/cuda/emu/numeric.h"
#include "tests/cuda/emu/runtime.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  spore::emu::Elem e = spore::emu::Elem::kUnknown;
  int n = 0, c = 0, h = 0, w = 0;
  bool nchw = true;
};
struct cudnnFilterStruct {
  spore::emu::Elem e = spore::emu::Elem::kUnknown;
  int k = 0, c = 0, h = 0, w = 0;
  bool nchw = true;
};
struct cudnnConvolutionStruct {
  int ph = 0, pw = 0, sh = 1, sw = 1, dh = 1, dw = 1, groups = 1;
  bool cross = true;
  spore::emu::Elem compute = spore::emu::Elem::kF32;
};

namespace spore::emu {
namespace {

constexpr size_t kWorkspace = 256 * 1024;  // what the queries ask for: the backend must provide it

Elem elem_of(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return Elem::kF32;
    case CUDNN_DATA_DOUBLE:
      return Elem::kF64;
    case CUDNN_DATA_HALF:
      return Elem::kF16;
    case CUDNN_DATA_BFLOAT16:
      return Elem::kBF16;
    default:
      return Elem::kUnknown;
  }
}

cudnnStatus_t bad(const std::string& why) {
  std::fprintf(stderr, "[CUDA emulator] cuDNN: %s\n", why.c_str());
  return CUDNN_STATUS_BAD_PARAM;
}

std::string dims(int a, int b, int c, int d) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " +
         std::to_string(d) + ")";
}

// The geometry of one convolution, checked as cuDNN checks it.
struct Conv {
  cudnnTensorStruct x, y;
  cudnnFilterStruct w;
  cudnnConvolutionStruct c;
};
cudnnStatus_t check(const Conv& g) {
  const int cg = g.w.c;
  if (!g.x.nchw || !g.y.nchw || !g.w.nchw) return bad("only NCHW descriptors are emulated");
  if (!g.c.cross) return bad("only cross-correlation is emulated");
  if (g.x.e != g.y.e || g.x.e != g.w.e || g.x.e == Elem::kUnknown)
    return bad("x, w and y must share one data type");
  if (cg * g.c.groups != g.x.c || g.w.k % g.c.groups != 0 || g.w.k != g.y.c)
    return bad("channels disagree: x " + dims(g.x.n, g.x.c, g.x.h, g.x.w) + ", w " +
               dims(g.w.k, g.w.c, g.w.h, g.w.w) + ", groups " + std::to_string(g.c.groups) +
               ", y " + dims(g.y.n, g.y.c, g.y.h, g.y.w));
  const int oh = (g.x.h + 2 * g.c.ph - ((g.w.h - 1) * g.c.dh + 1)) / g.c.sh + 1;
  const int ow = (g.x.w + 2 * g.c.pw - ((g.w.w - 1) * g.c.dw + 1)) / g.c.sw + 1;
  if (g.y.n != g.x.n || g.y.h != oh || g.y.w != ow)
    return bad("y " + dims(g.y.n, g.y.c, g.y.h, g.y.w) + " is not the output of x " +
               dims(g.x.n, g.x.c, g.x.h, g.x.w) + " and w " + dims(g.w.k, g.w.c, g.w.h, g.w.w) +
               ": expected spatial size " + std::to_string(oh) + " x " + std::to_string(ow));
  return CUDNN_STATUS_SUCCESS;
}
size_t bytes(const cudnnTensorStruct& t) { return size_t(t.n) * t.c * t.h * t.w * elem_size(t.e); }
size_t bytes(const cudnnFilterStruct& t) { return size_t(t.k) * t.c * t.h * t.w * elem_size(t.e); }
cudnnStatus_t check_memory(const Conv& g, const void* x, const void* w, const void* y,
                           const void* ws, size_t ws_bytes) {
  if (!is_device_range(x, bytes(g.x)) || !is_device_range(y, bytes(g.y)) ||
      !is_device_range(w, bytes(g.w)))
    return bad("a tensor runs outside its device allocation");
  if (ws_bytes < kWorkspace || !is_device_range(ws, kWorkspace))
    return bad("the workspace is smaller than the query asked for, or not device memory");
  return CUDNN_STATUS_SUCCESS;
}

double scalar(const Conv& g, const void* p) {
  return g.x.e == Elem::kF64 ? *static_cast<const double*>(p) : *static_cast<const float*>(p);
}

// A tensor's elements as the accumulation type A (float, double for float64 data).
template <class A>
std::vector<A> widen(Elem e, const void* p, size_t n) {
  std::vector<A> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = A(load(e, p, int64_t(i)));
  return v;
}
// dst = alpha acc + beta dst (beta == 0 ignores dst, NaN included).
template <class A>
void finish(Elem e, void* dst, const std::vector<A>& acc, double alpha, double beta) {
  for (size_t i = 0; i < acc.size(); ++i) {
    double v = alpha * double(acc[i]);
    if (beta != 0) v += beta * load(e, dst, int64_t(i));
    store(e, dst, int64_t(i), v);
  }
}

// The output columns [lo, hi) whose input column ow * s - p + k * d lies inside [0, size).
inline void span(int size, int out, int s, int p, int kd, int& lo, int& hi) {
  const int off = kd - p;  // input column of ow = 0
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = size - 1 - off < 0 ? 0 : std::min(out, (size - 1 - off) / s + 1);
}

// Visits the product terms of output channel o of image n as contiguous runs of columns:
// f(c, kh, kw, x_row, y_row, lo, hi, x0): x column x0 + ow * sw meets y column ow, ow in [lo, hi).
template <class F>
void each_run(const Conv& g, int n, int o, F&& f) {
  const int og = g.w.k / g.c.groups;
  for (int c = 0; c < g.w.c; ++c) {
    const int ci = (o / og) * g.w.c + c;
    for (int kh = 0; kh < g.w.h; ++kh)
      for (int kw = 0; kw < g.w.w; ++kw) {
        int lo, hi;
        span(g.x.w, g.y.w, g.c.sw, g.c.pw, kw * g.c.dw, lo, hi);
        if (lo >= hi) continue;
        for (int oh = 0; oh < g.y.h; ++oh) {
          const int ih = oh * g.c.sh - g.c.ph + kh * g.c.dh;
          if (ih < 0 || ih >= g.x.h) continue;
          const size_t xrow = ((size_t(n) * g.x.c + ci) * g.x.h + ih) * g.x.w;
          const size_t yrow = ((size_t(n) * g.y.c + o) * g.y.h + oh) * g.y.w;
          f(c, kh, kw, xrow, yrow, lo, hi, kw * g.c.dw - g.c.pw);
        }
      }
  }
}
size_t widx(const Conv& g, int o, int c, int kh, int kw) {
  return ((size_t(o) * g.w.c + c) * g.w.h + kh) * g.w.w + kw;
}

// The three passes, each parallel over what its threads write apart: (image, output channel)
// forward, image for the data gradient, output channel for the filter gradient.
template <class A>
void forward(const Conv& g, const void* x, const void* w, void* y, double a, double b) {
  const std::vector<A> X = widen<A>(g.x.e, x, bytes(g.x) / elem_size(g.x.e)),
                       W = widen<A>(g.w.e, w, bytes(g.w) / elem_size(g.w.e));
  std::vector<A> Y(bytes(g.y) / elem_size(g.y.e), A(0));
  const int sw = g.c.sw;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < g.y.n; ++n)
    for (int o = 0; o < g.y.c; ++o)
      each_run(g, n, o, [&](int c, int kh, int kw, size_t xr, size_t yr, int lo, int hi, int x0) {
        const A wv = W[widx(g, o, c, kh, kw)];
        A* yp = &Y[yr];
        const A* xp = &X[xr + size_t(x0)];
        if (sw == 1)
          for (int ow = lo; ow < hi; ++ow) yp[ow] += wv * xp[ow];
        else
          for (int ow = lo; ow < hi; ++ow) yp[ow] += wv * xp[ow * sw];
      });
  finish(g.y.e, y, Y, a, b);
}
template <class A>
void backward_data(const Conv& g, const void* dy, const void* w, void* dx, double a, double b) {
  const std::vector<A> DY = widen<A>(g.y.e, dy, bytes(g.y) / elem_size(g.y.e)),
                       W = widen<A>(g.w.e, w, bytes(g.w) / elem_size(g.w.e));
  std::vector<A> DX(bytes(g.x) / elem_size(g.x.e), A(0));
  const int sw = g.c.sw;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < g.y.n; ++n)
    for (int o = 0; o < g.y.c; ++o)
      each_run(g, n, o, [&](int c, int kh, int kw, size_t xr, size_t yr, int lo, int hi, int x0) {
        const A wv = W[widx(g, o, c, kh, kw)];
        const A* gp = &DY[yr];
        A* dp = &DX[xr + size_t(x0)];
        if (sw == 1)
          for (int ow = lo; ow < hi; ++ow) dp[ow] += wv * gp[ow];
        else
          for (int ow = lo; ow < hi; ++ow) dp[ow * sw] += wv * gp[ow];
      });
  finish(g.x.e, dx, DX, a, b);
}
template <class A>
void backward_filter(const Conv& g, const void* x, const void* dy, void* dw, double a, double b) {
  const std::vector<A> X = widen<A>(g.x.e, x, bytes(g.x) / elem_size(g.x.e)),
                       DY = widen<A>(g.y.e, dy, bytes(g.y) / elem_size(g.y.e));
  std::vector<A> DW(bytes(g.w) / elem_size(g.w.e), A(0));
  const int sw = g.c.sw;
#pragma omp parallel for schedule(static)
  for (int o = 0; o < g.y.c; ++o)
    for (int n = 0; n < g.y.n; ++n)
      each_run(g, n, o, [&](int c, int kh, int kw, size_t xr, size_t yr, int lo, int hi, int x0) {
        const A* gp = &DY[yr];
        const A* xp = &X[xr + size_t(x0)];
        A acc = 0;
        for (int ow = lo; ow < hi; ++ow) acc += gp[ow] * xp[ow * sw];
        DW[widx(g, o, c, kh, kw)] += acc;
      });
  finish(g.w.e, dw, DW, a, b);
}

// The descriptors and the handle are plain host objects: made and freed the same way.
template <class T>
cudnnStatus_t make(T** out) {
  *out = new T;
  return CUDNN_STATUS_SUCCESS;
}
template <class T>
cudnnStatus_t destroy(T* p) {
  delete p;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace spore::emu

using namespace spore::emu;

size_t cudnnGetVersion() { return CUDNN_VERSION; }
const char* cudnnGetErrorString(cudnnStatus_t s) {
  return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS"
                                   : "CUDNN_STATUS_BAD_PARAM (the CUDA emulator printed why)";
}
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) { return make(h); }
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { return destroy(h); }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { return make(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t t, int n, int c, int h, int w) {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
    return bad("tensor descriptor with a non-positive dim " + dims(n, c, h, w));
  *d = cudnnTensorStruct{elem_of(t), n, c, h, w, format == CUDNN_TENSOR_NCHW};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { return make(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
    return bad("filter descriptor with a non-positive dim " + dims(k, c, h, w));
  *d = cudnnFilterStruct{elem_of(t), k, c, h, w, format == CUDNN_TENSOR_NCHW};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) { return make(d); }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  return destroy(d);
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw,
                                              int sh, int sw, int dh, int dw,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  if (ph < 0 || pw < 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0)
    return bad("convolution descriptor: negative padding or non-positive stride / dilation");
  d->ph = ph, d->pw = pw, d->sh = sh, d->sw = sw, d->dh = dh, d->dw = dw;
  d->cross = mode == CUDNN_CROSS_CORRELATION;
  d->compute = elem_of(compute);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
  if (groups <= 0) return bad("group count " + std::to_string(groups));
  d->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t, cudnnMathType_t) {
  return CUDNN_STATUS_SUCCESS;
}

// ---- algorithm queries: one deterministic algorithm, which wants a workspace
// ---------------------
template <class Perf, class Algo>
cudnnStatus_t one_algorithm(const Conv& g, int requested, int* returned, Perf* perf) {
  if (const cudnnStatus_t s = check(g)) return s;
  if (requested < 1) return bad("no algorithm requested");
  perf[0] = Perf{};
  perf[0].algo = Algo(1);
  perf[0].status = CUDNN_STATUS_SUCCESS;
  perf[0].memory = kWorkspace;
  perf[0].determinism = CUDNN_DETERMINISTIC;
  *returned = 1;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y,
                                                     const int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  return one_algorithm<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      Conv{*x, *y, *w, *c}, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, const int requested,
    int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  return one_algorithm<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      Conv{*dx, *dy, *w, *c}, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw, const int requested,
    int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  return one_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      Conv{*x, *dy, *dw, *c}, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t,
                                                      const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t c,
                                                      const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t, size_t* n) {
  *n = kWorkspace;
  return check(Conv{*x, *y, *w, *c});
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx,
    cudnnConvolutionBwdDataAlgo_t, size_t* n) {
  *n = kWorkspace;
  return check(Conv{*dx, *dy, *w, *c});
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw,
    cudnnConvolutionBwdFilterAlgo_t, size_t* n) {
  *n = kWorkspace;
  return check(Conv{*x, *dy, *dw, *c});
}

// ---- the computations, queued on the handle's stream -------------------------------------------
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void* alpha,
                                      const cudnnTensorDescriptor_t xd, const void* x,
                                      const cudnnFilterDescriptor_t wd, const void* w,
                                      const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t, void* ws, size_t ws_bytes,
                                      const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  const Conv g{*xd, *yd, *wd, *cd};
  if (const cudnnStatus_t s = check(g)) return s;
  if (const cudnnStatus_t s = check_memory(g, x, w, y, ws, ws_bytes)) return s;
  const double a = scalar(g, alpha), b = scalar(g, beta);
  const bool f32 = g.x.e != Elem::kF64;
  const cudaError_t e = enqueue(h->stream, "cudnnConvolutionForward", [=]() -> std::string {
    if (f32)
      forward<float>(g, x, w, y, a, b);
    else
      forward<double>(g, x, w, y, a, b);
    return std::string();
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void* alpha,
                                           const cudnnFilterDescriptor_t wd, const void* w,
                                           const cudnnTensorDescriptor_t dyd, const void* dy,
                                           const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t, void* ws, size_t ws_bytes,
                                           const void* beta, const cudnnTensorDescriptor_t dxd,
                                           void* dx) {
  const Conv g{*dxd, *dyd, *wd, *cd};
  if (const cudnnStatus_t s = check(g)) return s;
  if (const cudnnStatus_t s = check_memory(g, dx, w, dy, ws, ws_bytes)) return s;
  const double a = scalar(g, alpha), b = scalar(g, beta);
  const bool f32 = g.x.e != Elem::kF64;
  const cudaError_t e = enqueue(h->stream, "cudnnConvolutionBackwardData", [=]() -> std::string {
    if (f32)
      backward_data<float>(g, dy, w, dx, a, b);
    else
      backward_data<double>(g, dy, w, dx, a, b);
    return std::string();
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void* alpha,
                                             const cudnnTensorDescriptor_t xd, const void* x,
                                             const cudnnTensorDescriptor_t dyd, const void* dy,
                                             const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t, void* ws,
                                             size_t ws_bytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwd, void* dw) {
  const Conv g{*xd, *dyd, *dwd, *cd};
  if (const cudnnStatus_t s = check(g)) return s;
  if (const cudnnStatus_t s = check_memory(g, x, dw, dy, ws, ws_bytes)) return s;
  const double a = scalar(g, alpha), b = scalar(g, beta);
  const bool f32 = g.x.e != Elem::kF64;
  const cudaError_t e = enqueue(h->stream, "cudnnConvolutionBackwardFilter", [=]() -> std::string {
    if (f32)
      backward_filter<float>(g, x, dy, dw, a, b);
    else
      backward_filter<double>(g, x, dy, dw, a, b);
    return std::string();
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

// C = alpha A + beta C, A broadcast over C where its dims are 1.
cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t ad,
                             const void* A, const void* beta, const cudnnTensorDescriptor_t cd,
                             void* C) {
  const cudnnTensorStruct a = *ad, c = *cd;
  if (a.e != c.e || a.e == Elem::kUnknown) return bad("AddTensor: the types differ");
  if ((a.n != 1 && a.n != c.n) || (a.c != 1 && a.c != c.c) || (a.h != 1 && a.h != c.h) ||
      (a.w != 1 && a.w != c.w))
    return bad("AddTensor: A " + dims(a.n, a.c, a.h, a.w) + " does not broadcast to C " +
               dims(c.n, c.c, c.h, c.w));
  if (!is_device_range(A, bytes(a)) || !is_device_range(C, bytes(c)))
    return bad("AddTensor: a tensor runs outside its device allocation");
  const bool dbl = a.e == Elem::kF64;
  const double al = dbl ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = dbl ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  const cudaError_t e = enqueue(h->stream, "cudnnAddTensor", [=]() -> std::string {
    for (int n = 0; n < c.n; ++n)
      for (int ch = 0; ch < c.c; ++ch)
        for (int y = 0; y < c.h; ++y)
          for (int x = 0; x < c.w; ++x) {
            const int64_t ci = ((int64_t(n) * c.c + ch) * c.h + y) * c.w + x;
            const int64_t ai = ((int64_t(a.n == 1 ? 0 : n) * a.c + (a.c == 1 ? 0 : ch)) * a.h +
                                (a.h == 1 ? 0 : y)) *
                                   a.w +
                               (a.w == 1 ? 0 : x);
            double v = al * load(a.e, A, ai);
            if (be != 0) v += be * load(c.e, C, ci);
            store(c.e, C, ci, v);
          }
    return std::string();
  });
  return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}
