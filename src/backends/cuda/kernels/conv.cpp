// Convolution on the GPU through cuDNN (linked dynamically; on the GPU machine it comes from the
// nvidia-cudnn pip package): forward (+ bias), data gradient and weight gradient, NCHW, any
// stride, dilation and groups, float32 (FMA math: no TF32, the CPU's numbers), float16 / bfloat16
// (tensor cores, float32 accumulation) and float64. The algorithm of each geometry is chosen once
// by cuDNN's heuristics (the _v7 queries, no benchmarking) and cached with its workspace size,
// like the CPU's oneDNN primitive cache; the workspace comes from the stream-ordered allocator.
// cuDNN's 2-d descriptor takes one padding per axis: asymmetric padding goes through an explicitly
// padded input (Geom). Uses cuDNN's legacy convolution API (deprecated in cuDNN 9, still shipped);
// the graph API is the next step.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "ops/op.h"

#define SPORE_CUDNN_CHECK(call)                                                                   \
  do {                                                                                            \
    const cudnnStatus_t spore_st_ = (call);                                                       \
    if (spore_st_ != CUDNN_STATUS_SUCCESS)                                                        \
      SPORE_THROW(::spore::ErrorKind::RuntimeError, "[GPU] ", #call,                              \
                  " failed: ", cudnnGetErrorString(spore_st_), " (cuDNN status ", int(spore_st_), \
                  ")");                                                                           \
  } while (0)

namespace spore::cuda {
namespace {

// One handle per device and thread (a handle is not for concurrent use).
cudnnHandle_t handle(int device) {
  thread_local std::array<cudnnHandle_t, 16> handles{};
  SPORE_CHECK(device >= 0 && device < 16, "[GPU] cuDNN: device ", device, " out of range");
  if (!handles[size_t(device)]) {
    int prev = 0;
    SPORE_CUDA_CHECK(cudaGetDevice(&prev));
    SPORE_CUDA_CHECK(cudaSetDevice(device));
    SPORE_CUDNN_CHECK(cudnnCreate(&handles[size_t(device)]));
    SPORE_CUDA_CHECK(cudaSetDevice(prev));
  }
  return handles[size_t(device)];
}

struct Types {
  cudnnDataType_t data, compute;
  cudnnMathType_t math;
};
Types types_of(DType t) {
  switch (t) {
    case kFloat32:
      return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH};
    case kFloat16:
      return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    case kBFloat16:
      return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    case kFloat64:
      return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_FMA_MATH};
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] conv2d: no kernel for ", dtype_name(t));
  }
}

// The geometry cuDNN sees: x (N, C, H, W), w (O, C / G, kh, kw), y (N, O, OH, OW), one padding
// per axis. Asymmetric padding (MindSpore's "same" with stride 2 pads one more after than before)
// is split: cuDNN pads both sides by the smaller amount, and x is padded explicitly by the rest
// (extra: left, right, top, bottom), so H and W here are those of the explicitly padded x.
struct Geom {
  int64_t N, C, H, W, O, kh, kw, OH, OW, sh, sw, ph, pw, dh, dw, G;
  DType dt;
  std::vector<int64_t> extra;  // {left, right, top, bottom}; empty when symmetric
  auto key() const {
    return std::make_tuple(N, C, H, W, O, kh, kw, OH, OW, sh, sw, ph, pw, dh, dw, G, int(dt));
  }
};

Geom geom(const Shape& x, const Shape& w, const Shape& y, const ops::Attrs& a, DType dt,
          const char* op) {
  SPORE_CHECK(!a.get_bool("blocked_x", false) && !a.get_bool("blocked_y", false), "[GPU] ", op,
              ": the blocked (nChw16c) layout is the CPU's");
  const auto st = a.get_ints("stride"), pad = a.get_ints("padding"), dil = a.get_ints("dilation");
  const int64_t ph = std::min(pad[0], pad[1]), pw = std::min(pad[2], pad[3]);
  Geom g{x[0], x[1],  x[2],  x[3], w[0], w[2],   w[3],   y[2],
         y[3], st[0], st[1], ph,   pw,   dil[0], dil[1], a.get_int("groups", 1),
         dt,   {}};
  if (pad[0] != pad[1] || pad[2] != pad[3]) {
    g.extra = {pad[2] - pw, pad[3] - pw, pad[0] - ph, pad[1] - ph};
    g.H += g.extra[2] + g.extra[3];
    g.W += g.extra[0] + g.extra[1];
  }
  return g;
}

// x padded by the geometry's extra amounts (a Pad kernel on this device); x itself when none.
Tensor padded(const Tensor& x, const Geom& g) {
  if (g.extra.empty()) return x;
  return ops::call1(ops::OpId::Pad, {x}, ops::Attrs().set("pads", g.extra).set("value", 0.0));
}

// The descriptors of one geometry, made for each call (cheap host objects).
struct Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit Descs(const Geom& g) {
    const Types t = types_of(g.dt);
    SPORE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    SPORE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    SPORE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    SPORE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    SPORE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, t.data, int(g.N), int(g.C),
                                                 int(g.H), int(g.W)));
    SPORE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, t.data, int(g.N), int(g.O),
                                                 int(g.OH), int(g.OW)));
    SPORE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, t.data, CUDNN_TENSOR_NCHW, int(g.O),
                                                 int(g.C / g.G), int(g.kh), int(g.kw)));
    SPORE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, int(g.ph), int(g.pw), int(g.sh),
                                                      int(g.sw), int(g.dh), int(g.dw),
                                                      CUDNN_CROSS_CORRELATION, t.compute));
    SPORE_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, int(g.G)));
    SPORE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, t.math));
  }
  ~Descs() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
};

enum class Pass { kForward, kData, kWeight };

// The chosen algorithm and its workspace, per (pass, geometry).
struct Choice {
  int algo = 0;
  size_t workspace = 0;
};

// The first of cuDNN's ranked candidates that is supported (the descriptor's math type keeps
// float32 off TF32), the first deterministic one where there is one.
template <class Perf>
Choice pick(const std::vector<Perf>& perf, int n, const char* op) {
  const Perf* best = nullptr;
  for (int i = 0; i < n; ++i) {
    const Perf& p = perf[size_t(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (!best) best = &p;
    if (p.determinism == CUDNN_DETERMINISTIC) {
      best = &p;
      break;
    }
  }
  SPORE_CHECK(best, "[GPU] ", op, ": cuDNN offers no algorithm for this geometry");
  return {int(best->algo), best->memory};
}

Choice choose(Pass pass, const Geom& g, const Descs& d, cudnnHandle_t h) {
  static std::mutex mu;
  static std::map<std::pair<int, decltype(g.key())>, Choice> cache;
  const auto key = std::make_pair(int(pass), g.key());
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  Choice c;
  int n = 0;
  if (pass == Pass::kForward) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    SPORE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                             int(perf.size()), &n, perf.data()));
    c = pick(perf, n, "conv2d");
    SPORE_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        h, d.x, d.w, d.conv, d.y, cudnnConvolutionFwdAlgo_t(c.algo), &c.workspace));
  } else if (pass == Pass::kData) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    SPORE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, d.w, d.y, d.conv, d.x, int(perf.size()), &n, perf.data()));
    c = pick(perf, n, "conv2d_backward_data");
    SPORE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w, d.y, d.conv, d.x, cudnnConvolutionBwdDataAlgo_t(c.algo), &c.workspace));
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
    SPORE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, d.x, d.y, d.conv, d.w, int(perf.size()), &n, perf.data()));
    c = pick(perf, n, "conv2d_backward_weight");
    SPORE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x, d.y, d.conv, d.w, cudnnConvolutionBwdFilterAlgo_t(c.algo), &c.workspace));
  }
  std::lock_guard lock(mu);
  cache[key] = c;
  return c;
}

// alpha / beta: double for float64 data, float otherwise (cuDNN's rule).
struct Scale {
  float f1 = 1, f0 = 0;
  double d1 = 1, d0 = 0;
  bool dbl;
  explicit Scale(DType t) : dbl(t == kFloat64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};

Tensor dense(const Tensor& t) { return t.contiguous(); }

cudnnHandle_t handle_for(const ops::KernelContext& ctx, int device) {
  cudnnHandle_t h = handle(device);
  SPORE_CUDNN_CHECK(cudnnSetStream(h, native(ctx.stream->native_handle())));
  return h;
}

Tensor workspace(size_t bytes, Device device) {
  return bytes ? Tensor::empty({int64_t(bytes)}, kUInt8, device) : Tensor();
}
void* ptr(const Tensor& t) { return t.defined() ? const_cast<void*>(t.data_ptr()) : nullptr; }

// (x, w[, bias]) -> y
void conv2d(ops::KernelContext& ctx) {
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Tensor w = dense(ctx.inputs[1]);
  const Geom g = geom(ctx.inputs[0].shape(), w.shape(), y.shape(), ctx.attrs, y.dtype(), "conv2d");
  const Tensor x = dense(padded(ctx.inputs[0], g));
  const Descs d(g);
  cudnnHandle_t h = handle_for(ctx, y.device().index);
  const Choice c = choose(Pass::kForward, g, d, h);
  const Tensor ws = workspace(c.workspace, y.device());
  const Scale s(g.dt);
  SPORE_CUDNN_CHECK(cudnnConvolutionForward(h, s.one(), d.x, x.data_ptr(), d.w, w.data_ptr(),
                                            d.conv, cudnnConvolutionFwdAlgo_t(c.algo), ptr(ws),
                                            c.workspace, s.zero(), d.y, y.data_ptr()));
  if (ctx.inputs.size() == 3) {  // y += bias, broadcast over (N, ., OH, OW)
    const Tensor b =
        dense(ctx.inputs[2].dtype() == y.dtype() ? ctx.inputs[2] : ctx.inputs[2].to(y.dtype()));
    cudnnTensorDescriptor_t bd;
    SPORE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
    const cudnnStatus_t st =
        cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, types_of(g.dt).data, 1, int(g.O), 1, 1);
    const cudnnStatus_t add =
        st == CUDNN_STATUS_SUCCESS
            ? cudnnAddTensor(h, s.one(), bd, b.data_ptr(), s.one(), d.y, y.data_ptr())
            : st;
    cudnnDestroyTensorDescriptor(bd);
    SPORE_CUDNN_CHECK(add);
  }
}

// (dy, w) -> dx; attrs + input_shape
void conv2d_backward_data(ops::KernelContext& ctx) {
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  const Tensor dy = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  const Geom g =
      geom(dx.shape(), w.shape(), dy.shape(), ctx.attrs, dx.dtype(), "conv2d_backward_data");
  if (dy.numel() == 0) {
    SPORE_CUDA_CHECK(
        cudaMemsetAsync(dx.data_ptr(), 0, dx.nbytes(), native(ctx.stream->native_handle())));
    return;
  }
  const Descs d(g);
  cudnnHandle_t h = handle_for(ctx, dx.device().index);
  const Choice c = choose(Pass::kData, g, d, h);
  const Tensor ws = workspace(c.workspace, dx.device());
  const Scale s(g.dt);
  // With extra padding the gradient of the padded x is computed, then cropped into dx.
  const Tensor dxp =
      g.extra.empty() ? dx : Tensor::empty({g.N, g.C, g.H, g.W}, dx.dtype(), dx.device());
  SPORE_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.one(), d.w, w.data_ptr(), d.y, dy.data_ptr(),
                                                 d.conv, cudnnConvolutionBwdDataAlgo_t(c.algo),
                                                 ptr(ws), c.workspace, s.zero(), d.x,
                                                 const_cast<void*>(dxp.data_ptr())));
  if (!g.extra.empty()) {
    std::vector<int64_t> crop;
    for (int64_t e : g.extra) crop.push_back(-e);
    const Tensor cropped =
        ops::call1(ops::OpId::Pad, {dxp}, ops::Attrs().set("pads", crop).set("value", 0.0));
    ops::call(ops::OpId::Assign, {dx, cropped});
  }
}

// (dy, x) -> dw; attrs + weight_shape
void conv2d_backward_weight(ops::KernelContext& ctx) {
  Tensor& dw = ctx.outputs[0];
  if (dw.numel() == 0) return;
  const Tensor dy = dense(ctx.inputs[0]);
  const Geom g = geom(ctx.inputs[1].shape(), dw.shape(), dy.shape(), ctx.attrs, dw.dtype(),
                      "conv2d_backward_weight");
  const Tensor x = dense(padded(ctx.inputs[1], g));
  if (dy.numel() == 0) {
    SPORE_CUDA_CHECK(
        cudaMemsetAsync(dw.data_ptr(), 0, dw.nbytes(), native(ctx.stream->native_handle())));
    return;
  }
  const Descs d(g);
  cudnnHandle_t h = handle_for(ctx, dw.device().index);
  const Choice c = choose(Pass::kWeight, g, d, h);
  const Tensor ws = workspace(c.workspace, dw.device());
  const Scale s(g.dt);
  SPORE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, s.one(), d.x, x.data_ptr(), d.y, dy.data_ptr(), d.conv,
      cudnnConvolutionBwdFilterAlgo_t(c.algo), ptr(ws), c.workspace, s.zero(), d.w, dw.data_ptr()));
}

}  // namespace

SPORE_KERNEL(GPU, Conv2d, conv2d, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(GPU, Conv2dBackwardData, conv2d_backward_data, kFloat32, kFloat64, kBFloat16,
             kFloat16);
SPORE_KERNEL(GPU, Conv2dBackwardWeight, conv2d_backward_weight, kFloat32, kFloat64, kBFloat16,
             kFloat16);

}  // namespace spore::cuda
