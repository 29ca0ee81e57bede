// Indexing and shape-changing kernels on the GPU: Gather, IndexSelect, ScatterAdd, OneHot, Cumsum,
// Concat, Split, Pad, UpsampleNearest2d (+ backward) and Dropout, with the CPU kernels' semantics
// (backends/cpu/kernels/index.cpp, index_shape.cpp). Inputs may have any strides; outputs are
// contiguous. One thread per output element (or per lane for cumsum), shapes walked by Walk.
//
// Index values are not checked on the GPU (that needs a host synchronisation per op): an
// out-of-range index reads zero (gather, index_select) or is skipped (scatter_add, one_hot),
// where the CPU throws IndexError. ScatterAdd adds with atomics, so float sums may round in any
// order. Dropout draws from core/random.h's counter-based generator: the same mask bits as the CPU
// for the same seed.
#include <cmath>
#include <vector>

#include "backends/cuda/kernels/common.cuh"
#include "core/random.h"

namespace spore::cuda {
namespace {

// Walk over `shape` with up to three operands' strides; `skip` (>= 0): that dim's stride is 0
// in every operand (its coordinate is supplied by the kernel). An empty stride list (a 0-d
// tensor's) gives zeros.
Walk make_walk(const Shape& shape, std::initializer_list<const Shape*> strides, int64_t skip = -1) {
  Walk w;
  SPORE_CHECK(shape.size() <= size_t(kWalkDims), "[GPU] at most ", kWalkDims, " dims, got ",
              shape.size());
  w.nd = int(shape.size());
  for (int d = 0; d < w.nd; ++d) {
    w.size[d] = shape[size_t(d)];
    int k = 0;
    for (const Shape* st : strides) {
      w.st[k][d] = (d == skip || !st || st->empty()) ? 0 : (*st)[size_t(d)];
      ++k;
    }
  }
  return w;
}

// ---- gather: out[..i..] = x[..index[..i..]..] along the axis ------------------------------------
// Walk over index's shape: st[0] x (axis stride 0), st[1] index.
template <class T, class I>
__global__ void gather_kernel(T* out, const T* x, const I* index, Walk w, int64_t n,
                              int64_t x_ax_stride, int64_t x_ax_size, BadValue* bad) {
  SPORE_GRID_LOOP(i, n) {
    int64_t off[3];
    walk_offsets(w, i, off);
    const int64_t v = int64_t(index[off[1]]);
    const bool ok = v >= 0 && v < x_ax_size;
    if (!ok) report_bad_value(bad, kBadGatherIndex, v, x_ax_size);
    out[i] = ok ? x[off[0] + v * x_ax_stride] : cvt<T>(0.0f);
  }
}

void gather(ops::KernelContext& ctx) {
  const Tensor &x = ctx.inputs[0], &index = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const Shape xst = x.dim() ? x.strides() : Shape{}, ist = index.dim() ? index.strides() : Shape{};
  Walk w = make_walk(index.shape(), {&xst, &ist});
  if (ax >= 0) w.st[0][ax] = 0;  // x's coordinate along the axis comes from the index
  const int64_t xs = ax >= 0 ? x.strides()[size_t(ax)] : 0, xn = ax >= 0 ? x.size(ax) : 1;
  const Launch1d l = launch_1d(n);
  visit_all(x.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), "gather", [&](auto itag) {
      using I = decltype(itag);
      gather_kernel<T, I><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(out), data_of<T>(x), data_of<I>(index), w, n, xs, xn,
          bad_value_slot(out.device().index));
    });
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- index_select: x's slices along the axis picked by a 1-d index (negative counts from the end)
// Walk over out's shape: st[0] x (axis stride 0); the axis coordinate j picks index[j].
template <class T, class I>
__global__ void index_select_kernel(T* out, const T* x, const I* index, Walk w, int64_t n, int ax,
                                    int64_t index_stride, int64_t x_ax_stride, int64_t x_ax_size,
                                    BadValue* bad) {
  SPORE_GRID_LOOP(i, n) {
    int64_t off[3];
    walk_offsets(w, i, off);
    int64_t j = 0;
    if (ax >= 0) {
      int64_t q = i;
      for (int d = w.nd - 1; d > ax; --d) q /= w.size[d];
      j = q % w.size[ax];
    }
    const int64_t given = int64_t(index[j * index_stride]);
    const int64_t v = given < 0 ? given + x_ax_size : given;
    const bool ok = v >= 0 && v < x_ax_size;
    if (!ok) report_bad_value(bad, kBadIndexSelectIndex, given, x_ax_size);
    out[i] = ok ? x[off[0] + v * x_ax_stride] : cvt<T>(0.0f);
  }
}

void index_select(ops::KernelContext& ctx) {
  const Tensor &x = ctx.inputs[0], &index = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const Shape xst = x.dim() ? x.strides() : Shape{};
  const Walk w = make_walk(out.shape(), {&xst}, ax);
  const int64_t xs = ax >= 0 ? x.strides()[size_t(ax)] : 0, xn = ax >= 0 ? x.size(ax) : 1;
  const int64_t is = index.dim() ? index.strides()[0] : 0;
  const Launch1d l = launch_1d(n);
  visit_all(x.dtype(), "index_select", [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), "index_select", [&](auto itag) {
      using I = decltype(itag);
      index_select_kernel<T, I><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(out), data_of<T>(x), data_of<I>(index), w, n, int(ax), is, xs, xn,
          bad_value_slot(out.device().index));
    });
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- scatter_add: out = x; out[..index[..i..]..] += src[..i..] ----------------------------------
template <class T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  else
    atomicAdd(p, v);
}

// Walk over index's shape: st[0] out (axis stride 0), st[1] index, st[2] src.
template <class T, class I>
__global__ void scatter_add_kernel(T* out, const I* index, const T* src, Walk w, int64_t n,
                                   int64_t out_ax_stride, int64_t out_ax_size, BadValue* bad) {
  SPORE_GRID_LOOP(i, n) {
    int64_t off[3];
    walk_offsets(w, i, off);
    const int64_t v = int64_t(index[off[1]]);
    if (v >= 0 && v < out_ax_size)
      atomic_add(out + off[0] + v * out_ax_stride, src[off[2]]);
    else
      report_bad_value(bad, kBadScatterAddIndex, v, out_ax_size);
  }
}

void scatter_add(ops::KernelContext& ctx) {
  const Tensor &x = ctx.inputs[0], &index = ctx.inputs[1], &src = ctx.inputs[2];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  copy_strided(out, x, stream_of(ctx));
  const int64_t n = index.numel();
  if (n == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const Shape ost = out.dim() ? out.strides() : Shape{},
              ist = index.dim() ? index.strides() : Shape{},
              sst = src.dim() ? src.strides() : Shape{};
  Walk w = make_walk(index.shape(), {&ost, &ist, &sst});
  if (ax >= 0) w.st[0][ax] = 0;
  const int64_t os = ax >= 0 ? out.strides()[size_t(ax)] : 0, on = ax >= 0 ? out.size(ax) : 1;
  const Launch1d l = launch_1d(n);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), "scatter_add", [&](auto itag) {
      using I = decltype(itag);
      scatter_add_kernel<T, I><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(out), data_of<I>(index), data_of<T>(src), w, n, os, on,
          bad_value_slot(out.device().index));
    });
  };
  switch (x.dtype()) {  // the dtypes CUDA has atomic adds for
    case kFloat32:
      run(float{});
      break;
    case kFloat64:
      run(double{});
      break;
    case kFloat16:
      run(__half{});
      break;
    case kBFloat16:
      run(__nv_bfloat16{});
      break;
    case kInt32:
      run(int32_t{});
      break;
    case kInt64:
      run(int64_t{});
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] scatter_add: no kernel for ", dtype_name(x.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- one_hot: (...) int -> (..., depth) ---------------------------------------------------------
template <class T, class I>
__global__ void one_hot_kernel(T* out, const I* index, Walk w, int64_t n, int64_t depth,
                               BadValue* bad) {
  SPORE_GRID_LOOP(i, n) {
    int64_t off[3];
    walk_offsets(w, i, off);
    const int64_t v = int64_t(index[off[0]]);
    if (v >= 0 && v < depth)
      out[i * depth + v] = cvt<T>(1.0f);
    else
      report_bad_value(bad, kBadOneHotIndex, v, depth);
  }
}

void one_hot(ops::KernelContext& ctx) {
  const Tensor& index = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  SPORE_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream_of(ctx)));
  const int64_t n = index.numel(), depth = ctx.attrs.get_int("depth");
  const Shape ist = index.dim() ? index.strides() : Shape{};
  const Walk w = make_walk(index.shape(), {&ist});
  const Launch1d l = launch_1d(n);
  visit_all(out.dtype(), "one_hot", [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), "one_hot", [&](auto itag) {
      using I = decltype(itag);
      one_hot_kernel<T, I><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(out), data_of<I>(index), w, n, depth, bad_value_slot(out.device().index));
    });
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- cumsum (reverse: from the end): a thread per lane ------------------------------------------
// Walk over the lanes (the shape without the axis): st[0] x, st[1] out.
template <class T, class A, class Out>
__global__ void cumsum_kernel(Out* out, const T* x, Walk w, int64_t lanes, int64_t n, int64_t xs,
                              int64_t os, bool reverse) {
  SPORE_GRID_LOOP(l, lanes) {
    int64_t off[3];
    walk_offsets(w, l, off);
    A acc = A(0);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t i = reverse ? n - 1 - t : t;
      acc += A(cvt<calc_t<T>>(x[off[0] + i * xs]));
      out[off[1] + i * os] = cvt<Out>(acc);
    }
  }
}

void cumsum(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const int64_t n = ax >= 0 ? x.size(ax) : 1, lanes = x.numel() / std::max<int64_t>(n, 1);
  const int64_t xs = ax >= 0 ? x.strides()[size_t(ax)] : 0,
                os = ax >= 0 ? out.strides()[size_t(ax)] : 0;
  Shape lane_shape, xst, ost;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != ax) {
      lane_shape.push_back(x.size(d));
      xst.push_back(x.strides()[size_t(d)]);
      ost.push_back(out.strides()[size_t(d)]);
    }
  const Walk w = make_walk(lane_shape, {&xst, &ost});
  const bool reverse = ctx.attrs.get_bool("reverse", false);
  const Launch1d l = launch_1d(lanes);
  visit_all(x.dtype(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kFloating<T>) {
      cumsum_kernel<T, calc_t<T>, T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<T>(out), data_of<T>(x), w, lanes, n, xs, os, reverse);
    } else {
      cumsum_kernel<T, int64_t, int64_t><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
          data_of<int64_t>(out), data_of<T>(x), w, lanes, n, xs, os, reverse);
    }
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- concat / split / pad: strided copies into and out of views ---------------------------------
void concat(ops::KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int64_t ax = ops::normalize_axis(ctx.attrs.get_int("axis"), out.dim());
  int64_t start = 0;
  for (const Tensor& x : ctx.inputs) {
    if (x.numel() > 0)
      copy_strided(
          alias(out, x.shape(), out.strides(), out.offset() + start * out.strides()[size_t(ax)]), x,
          stream_of(ctx));
    start += x.size(ax);
  }
}

void split(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t ax = ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim());
  int64_t start = 0;
  for (Tensor& o : ctx.outputs) {
    if (o.numel() > 0)
      copy_strided(o,
                   alias(x, o.shape(), x.strides(), x.offset() + start * x.strides()[size_t(ax)]),
                   stream_of(ctx));
    start += o.size(ax);
  }
}

template <class T>
__global__ void fill_kernel(T* out, int64_t n, T v) {
  SPORE_GRID_LOOP(i, n) out[i] = v;
}

// Fills with the value, then copies the overlap (negative pads crop).
void pad(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const auto& pads = ctx.attrs.get_ints("pads");
  const double value = ctx.attrs.get_float("value", 0);
  const Launch1d l = launch_1d(out.numel());
  visit_all(out.dtype(), "pad", [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T>
        <<<l.blocks, l.threads, 0, stream_of(ctx)>>>(data_of<T>(out), out.numel(), cvt<T>(value));
  });
  SPORE_CUDA_CHECK_LAUNCH();
  Shape region = x.shape();
  int64_t xoff = x.offset(), ooff = out.offset();
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t dim = size_t(x.dim()) - 1 - k;
    const int64_t before = pads[2 * k], after = pads[2 * k + 1];
    const int64_t crop_lo = std::max<int64_t>(0, -before), crop_hi = std::max<int64_t>(0, -after);
    region[dim] = std::max<int64_t>(0, x.shape()[dim] - crop_lo - crop_hi);
    xoff += crop_lo * x.strides()[dim];
    ooff += std::max<int64_t>(0, before) * out.strides()[dim];
  }
  if (shape_numel(region) == 0) return;
  copy_strided(alias(out, region, out.strides(), ooff), alias(x, region, x.strides(), xoff),
               stream_of(ctx));
}

// ---- nearest upsampling: source index min(in - 1, dst * in / out) -------------------------------
template <class T>
__global__ void upsample_kernel(T* y, const T* x, int64_t n, int64_t C, int64_t H, int64_t W,
                                int64_t OH, int64_t OW, int64_t s0, int64_t s1, int64_t s2,
                                int64_t s3) {
  SPORE_GRID_LOOP(i, n) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, c = (i / (OW * OH)) % C, b = i / (OW * OH * C);
    const int64_t ih = min(H - 1, oh * H / OH), iw = min(W - 1, ow * W / OW);
    y[i] = x[b * s0 + c * s1 + ih * s2 + iw * s3];
  }
}

void upsample(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];  // (N, C, H, W)
  Tensor& y = ctx.outputs[0];       // (N, C, OH, OW)
  const int64_t n = y.numel();
  if (n == 0) return;
  const Shape& st = x.strides();
  const Launch1d l = launch_1d(n);
  visit_all(x.dtype(), "upsample_nearest2d", [&](auto tag) {
    using T = decltype(tag);
    upsample_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(y), data_of<T>(x), n, x.size(1), x.size(2), x.size(3), y.size(2), y.size(3),
        st[0], st[1], st[2], st[3]);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// dx[ih, iw] = the sum of dy over the output pixels whose source is (ih, iw): those are the rows
// [ceil(ih * OH / H), ceil((ih + 1) * OH / H)) (to OH for the last row), likewise the columns;
// summed row by row in order, as the CPU does.
template <class T>
__global__ void upsample_backward_kernel(T* dx, const T* g, int64_t n, int64_t C, int64_t H,
                                         int64_t W, int64_t OH, int64_t OW, int64_t s0, int64_t s1,
                                         int64_t s2, int64_t s3) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(i, n) {
    const int64_t iw = i % W, ih = (i / W) % H, c = (i / (W * H)) % C, b = i / (W * H * C);
    const int64_t h0 = (ih * OH + H - 1) / H, h1 = ih == H - 1 ? OH : ((ih + 1) * OH + H - 1) / H;
    const int64_t w0 = (iw * OW + W - 1) / W, w1 = iw == W - 1 ? OW : ((iw + 1) * OW + W - 1) / W;
    const T* plane = g + b * s0 + c * s1;
    A acc = A(0);
    for (int64_t oh = h0; oh < h1; ++oh)
      for (int64_t ow = w0; ow < w1; ++ow) acc += cvt<A>(plane[oh * s2 + ow * s3]);
    dx[i] = cvt<T>(acc);
  }
}

void upsample_backward(ops::KernelContext& ctx) {
  const Tensor& g = ctx.inputs[0];  // (N, C, OH, OW)
  Tensor& dx = ctx.outputs[0];      // (N, C, H, W)
  const int64_t n = dx.numel();
  if (n == 0) return;
  const Shape& st = g.strides();
  const Launch1d l = launch_1d(n);
  visit_float(g.dtype(), "upsample_nearest2d_backward", [&](auto tag) {
    using T = decltype(tag);
    upsample_backward_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(dx), data_of<T>(g), n, dx.size(1), dx.size(2), dx.size(3), g.size(2), g.size(3),
        st[0], st[1], st[2], st[3]);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// ---- dropout: element e keeps with probability 1 - p, drawn from counter base + e ---------------
template <class T>
__global__ void dropout_kernel(T* y, uint8_t* mask, const T* x, Walk w, int64_t n, double p,
                               calc_t<T> scale, uint64_t seed, uint64_t counter) {
  using A = calc_t<T>;
  SPORE_GRID_LOOP(e, n) {
    int64_t off[3];
    walk_offsets(w, e, off);
    const bool keep = random::uniform(seed, counter + uint64_t(e)) >= p;
    mask[e] = keep;
    y[e] = cvt<T>(keep ? A(cvt<A>(x[off[0]]) * scale) : A(0));
  }
}

void dropout(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor &y = ctx.outputs[0], &mask = ctx.outputs[1];
  const double p = ctx.attrs.get_float("p");
  // The counters are reserved on the host in the CPU's order: the same stream of draws.
  const uint64_t seed = random::seed(), counter = random::reserve(uint64_t(x.numel()));
  const int64_t n = y.numel();
  if (n == 0) return;
  const Shape xst = x.dim() ? x.strides() : Shape{};
  const Walk w = make_walk(x.shape(), {&xst});
  const Launch1d l = launch_1d(n);
  visit_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    // The CPU's scale in the compute type: 1 / (1 - p) rounded to float (double for float64).
    using A = calc_t<T>;
    const A scale = p < 1 ? A(1.0 / (1.0 - p)) : A(0);
    dropout_kernel<T><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(
        data_of<T>(y), data_of<uint8_t>(mask), data_of<T>(x), w, n, p, scale, seed, counter);
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

#define SPORE_ALL kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8, kInt8, kBool
SPORE_KERNEL(GPU, Gather, gather, SPORE_ALL);
SPORE_KERNEL(GPU, IndexSelect, index_select, SPORE_ALL);
SPORE_KERNEL(GPU, ScatterAdd, scatter_add, kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64);
SPORE_KERNEL(GPU, OneHot, one_hot, kUInt8, kInt8, kInt32, kInt64);
SPORE_KERNEL(GPU, Cumsum, cumsum, SPORE_ALL);
SPORE_KERNEL(GPU, Concat, concat, SPORE_ALL);
SPORE_KERNEL(GPU, Split, split, SPORE_ALL);
SPORE_KERNEL(GPU, Pad, pad, SPORE_ALL);
SPORE_KERNEL(GPU, UpsampleNearest2d, upsample, SPORE_ALL);
SPORE_KERNEL(GPU, UpsampleNearest2dBackward, upsample_backward, kFloat16, kBFloat16, kFloat32,
             kFloat64);
SPORE_KERNEL(GPU, Dropout, dropout, kFloat16, kBFloat16, kFloat32, kFloat64);
#undef SPORE_ALL

}  // namespace spore::cuda
