// CPU kernels for the indexing primitives: Gather, IndexSelect, ScatterAdd, OneHot, TopK, Sort,
// Cumsum and Assign. Most walk "lanes": 1-d runs along the op's axis, one per combination of the
// other coordinates. Lanes are independent (scatter_add: distinct lanes never hit the same output
// element), so they split across threads and results do not depend on the thread count.
// Index values are checked in the kernel; a bad one is reported after the parallel loop (an
// exception must not cross an OpenMP region).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/strided.h"
#include "ops/op.h"

namespace spore::cpu {
namespace {

// Calls f(offsets) for every lane along `axis` (-1: every element is a lane of length 1) of a
// shape that N operands share except along the axis.
template <int N, typename F>
void for_each_lane(const Shape& shape, int64_t axis, const std::array<Shape, N>& st,
                   int64_t lane_len, F&& f) {
  std::vector<int64_t> size;
  std::array<std::vector<int64_t>, N> s;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (int64_t(d) == axis) continue;
    size.push_back(shape[d]);
    for (int k = 0; k < N; ++k) s[size_t(k)].push_back(st[size_t(k)][d]);
  }
  const int nd = int(size.size());
  int64_t rows = 1;
  for (int64_t n : size) rows *= n;
  if (rows == 0) return;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(lane_len, 1)),
               [&](int64_t r0, int64_t r1) {
                 int64_t idx[kMaxDims] = {0}, r = r0;
                 std::array<int64_t, N> off{};
                 for (int d = nd - 1; d >= 0; --d) {
                   idx[d] = r % size[size_t(d)];
                   r /= size[size_t(d)];
                   for (int k = 0; k < N; ++k) off[size_t(k)] += idx[d] * s[size_t(k)][size_t(d)];
                 }
                 for (int64_t row = r0; row < r1; ++row) {
                   f(off);
                   for (int d = nd - 1; d >= 0; --d) {
                     for (int k = 0; k < N; ++k) off[size_t(k)] += s[size_t(k)][size_t(d)];
                     if (++idx[d] < size[size_t(d)]) break;
                     for (int k = 0; k < N; ++k) off[size_t(k)] -= idx[d] * s[size_t(k)][size_t(d)];
                     idx[d] = 0;
                   }
                 }
               });
}

// Remembers the first out-of-range index value seen by any thread.
struct BadIndex {
  std::atomic<bool> hit{false};
  std::atomic<int64_t> value{0};
  void report(int64_t v) {
    bool expected = false;
    if (hit.compare_exchange_strong(expected, true)) value = v;
  }
  void check(const char* op, int64_t n, int64_t axis) const {
    SPORE_CHECK_INDEX(!hit, "[", op, "] index ", value.load(), " is out of range for dimension ",
                      axis, " of size ", n);
  }
};

template <typename F>
void visit_index(DType t, F&& f) {
  switch (t) {
    case kUInt8:
      return f(uint8_t{});
    case kInt8:
      return f(int8_t{});
    case kInt32:
      return f(int32_t{});
    case kInt64:
      return f(int64_t{});
    default:
      SPORE_THROW(ErrorKind::TypeError, "index must be an integer tensor, got ", dtype_name(t));
  }
}

Shape strides0(const Tensor& t) { return t.dim() ? t.strides() : Shape{}; }

// ---- gather: out[..i..] = x[..index[..i..]..] along the axis ------------------------------------
void gather_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& index = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  if (x.dim() == 0) {  // 0-d: index must be 0
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      visit_index(index.dtype(), [&](auto itag) {
        const int64_t v = int64_t(*base<decltype(itag)>(index));
        SPORE_CHECK_INDEX(v == 0, "[gather] index ", v, " is out of range for a 0-d tensor");
        *base<T>(out) = *base<T>(x);
      });
    });
    return;
  }
  const int64_t ax = ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim());
  const int64_t n = x.size(ax), xs = x.strides()[size_t(ax)], m = index.size(ax);
  const int64_t is = index.strides()[size_t(ax)], os = out.strides()[size_t(ax)];
  BadIndex bad;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const T* src = base<T>(x);
      const I* ip = base<I>(index);
      T* dst = base<T>(out);
      for_each_lane<3>(index.shape(), ax, {out.strides(), index.strides(), x.strides()}, m,
                       [&](const std::array<int64_t, 3>& o) {
                         for (int64_t j = 0; j < m; ++j) {
                           const int64_t v = int64_t(ip[o[1] + j * is]);
                           if (v < 0 || v >= n) {
                             bad.report(v);
                             continue;
                           }
                           dst[o[0] + j * os] = src[o[2] + v * xs];
                         }
                       });
    });
  });
  bad.check("gather", n, ax);
}

// ---- index_select: rows of x picked by a 1-d index ----------------------------------------------
void index_select_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& index = ctx.inputs[1];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const int64_t n = x.dim() ? x.size(ax) : 1, m = index.numel();
  const int64_t xs = x.dim() ? x.strides()[size_t(ax)] : 0,
                os = out.dim() ? out.strides()[size_t(ax)] : 0;
  const int64_t is = index.dim() ? index.strides()[0] : 0;
  BadIndex bad;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const T* src = base<T>(x);
      const I* ip = base<I>(index);
      T* dst = base<T>(out);
      for_each_lane<2>(out.shape(), ax, {strides0(out), strides0(x)}, m,
                       [&](const std::array<int64_t, 2>& o) {
                         for (int64_t j = 0; j < m; ++j) {
                           int64_t v = int64_t(ip[j * is]);
                           if (v < 0)
                             v += n;  // negative indices count from the end, as torch.index_select
                           if (v < 0 || v >= n) {
                             bad.report(int64_t(ip[j * is]));
                             continue;
                           }
                           dst[o[0] + j * os] = src[o[1] + v * xs];
                         }
                       });
    });
  });
  bad.check("index_select", n, ax);
}

// ---- scatter_add: out = x; out[..index[..i..]..] += src[..i..] ----------------------------------
void scatter_add_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& index = ctx.inputs[1];
  const Tensor& src = ctx.inputs[2];
  Tensor& out = ctx.outputs[0];
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const int64_t n = x.dim() ? x.size(ax) : 1, m = index.dim() ? index.size(ax) : 1;
  const int64_t is = index.dim() ? index.strides()[size_t(ax)] : 0;
  const int64_t ss = src.dim() ? src.strides()[size_t(ax)] : 0,
                os = out.dim() ? out.strides()[size_t(ax)] : 0;
  BadIndex bad;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = base<T>(out);
    {  // out <- x
      const T* xp = base<T>(x);
      auto it = make_iter<2>(out.shape(), {out.strides(), x.strides()});
      for_each_row<2>(it, [&](const std::array<int64_t, 2>& off, int64_t len,
                              const std::array<int64_t, 2>& st) {
        for (int64_t i = 0; i < len; ++i) dst[off[0] + i * st[0]] = xp[off[1] + i * st[1]];
      });
    }
    if (index.numel() == 0) return;
    visit_index(index.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const I* ip = base<I>(index);
      const T* sp = base<T>(src);
      for_each_lane<3>(index.shape(), ax, {strides0(out), strides0(index), strides0(src)}, m,
                       [&](const std::array<int64_t, 3>& o) {
                         for (int64_t j = 0; j < m; ++j) {
                           const int64_t v = int64_t(ip[o[1] + j * is]);
                           if (v < 0 || v >= n) {
                             bad.report(v);
                             continue;
                           }
                           T& d = dst[o[0] + v * os];
                           if constexpr (std::is_same_v<T, bool>)
                             d = d || sp[o[2] + j * ss];
                           else
                             d = T(float_calc_t<T>(d) + float_calc_t<T>(sp[o[2] + j * ss]));
                         }
                       });
    });
  });
  bad.check("scatter_add", n, ax);
}

// ---- one_hot: (...) int -> (..., depth) ---------------------------------------------------------
void one_hot_kernel(ops::KernelContext& ctx) {
  const Tensor& index = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int64_t depth = ctx.attrs.get_int("depth");
  Shape ost = contiguous_strides(index.shape());
  for (int64_t& s : ost) s *= depth;
  BadIndex bad;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = base<T>(out);
    std::memset(static_cast<void*>(dst), 0, out.nbytes());
    const T one = T(float_calc_t<T>(1));
    visit_index(index.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const I* ip = base<I>(index);
      for_each_lane<2>(index.shape(), -1, {strides0(index), ost}, 1,
                       [&](const std::array<int64_t, 2>& o) {
                         const int64_t v = int64_t(ip[o[0]]);
                         if (v < 0 || v >= depth) {
                           bad.report(v);
                           return;
                         }
                         dst[o[1] + v] = one;
                       });
    });
  });
  SPORE_CHECK_INDEX(!bad.hit, "[one_hot] index ", bad.value.load(), " is out of range for depth ",
                    depth, " (expected 0 <= index < ", depth, ")");
}

// ---- topk / sort: per lane, order (value, position) pairs; ties keep the lower position ---------
template <typename A>
inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}
// NaN counts as larger than every number (as PyTorch).
template <typename A>
inline bool greater(A a, A b) {
  return !is_nan(b) && (is_nan(a) || a > b);
}

void sort_lanes(ops::KernelContext& ctx, int64_t k, bool descending) {
  const Tensor& x = ctx.inputs[0];
  Tensor& vals = ctx.outputs[0];
  Tensor& idxs = ctx.outputs[1];
  if (vals.numel() == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const int64_t n = x.dim() ? x.size(ax) : 1;
  const int64_t xs = x.dim() ? x.strides()[size_t(ax)] : 0,
                os = vals.dim() ? vals.strides()[size_t(ax)] : 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = float_calc_t<T>;
    const T* src = base<T>(x);
    T* vp = base<T>(vals);
    int64_t* ip = base<int64_t>(idxs);
    auto before = [descending](const std::pair<A, int64_t>& a, const std::pair<A, int64_t>& b) {
      if (descending ? greater(a.first, b.first) : greater(b.first, a.first)) return true;
      if (descending ? greater(b.first, a.first) : greater(a.first, b.first)) return false;
      return a.second < b.second;
    };
    for_each_lane<2>(x.shape(), ax, {strides0(x), strides0(vals)}, n,
                     [&](const std::array<int64_t, 2>& o) {
                       thread_local std::vector<std::pair<A, int64_t>> buf;
                       buf.resize(size_t(n));
                       for (int64_t i = 0; i < n; ++i) buf[size_t(i)] = {A(src[o[0] + i * xs]), i};
                       if (k < n)
                         std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), before);
                       else
                         std::sort(buf.begin(), buf.end(), before);
                       for (int64_t i = 0; i < k; ++i) {
                         vp[o[1] + i * os] = T(buf[size_t(i)].first);
                         ip[o[1] + i * os] = buf[size_t(i)].second;
                       }
                     });
  });
}

// Always returns the k values in order (a valid result for sorted=false too).
void topk_kernel(ops::KernelContext& ctx) {
  sort_lanes(ctx, ctx.attrs.get_int("k"), ctx.attrs.get_bool("largest", true));
}
void sort_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  sort_lanes(ctx, x.dim() ? x.size(ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim())) : 1,
             ctx.attrs.get_bool("descending", false));
}

// ---- cumsum (reverse: from the end) -------------------------------------------------------------
void cumsum_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const int64_t n = x.dim() ? x.size(ax) : 1;
  const int64_t xs = x.dim() ? x.strides()[size_t(ax)] : 0,
                os = out.dim() ? out.strides()[size_t(ax)] : 0;
  const bool reverse = ctx.attrs.get_bool("reverse", false);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kFloat = std::is_floating_point_v<T> || is_half_v<T>;
    using A = std::conditional_t<kFloat, float_calc_t<T>, int64_t>;
    using Out = std::conditional_t<kFloat, T, int64_t>;
    const T* src = base<T>(x);
    Out* dst = base<Out>(out);
    for_each_lane<2>(x.shape(), ax, {strides0(x), strides0(out)}, n,
                     [&](const std::array<int64_t, 2>& o) {
                       A acc = 0;
                       for (int64_t t = 0; t < n; ++t) {
                         const int64_t i = reverse ? n - 1 - t : t;
                         acc += A(src[o[0] + i * xs]);
                         dst[o[1] + i * os] = Out(acc);
                       }
                     });
  });
}

// ---- assign: dst <- src (broadcast, cast), in place through dst's strides -----------------------
void assign_kernel(ops::KernelContext& ctx) {
  const Tensor& dst = ctx.inputs[0];
  const Tensor& src = ctx.inputs[1];
  auto it = make_iter<2>(dst.shape(), {dst.strides(), broadcast_strides(src, dst.shape())});
  visit_dtype(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    visit_dtype(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      D* d = base<D>(dst);
      const S* s = base<S>(src);
      for_each_row<2>(
          it, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
            for (int64_t i = 0; i < n; ++i) {
              const S v = s[off[1] + i * st[1]];
              if constexpr (std::is_same_v<D, bool>)
                d[off[0] + i * st[0]] = float(v) != 0.0f;
              else if constexpr (is_half_v<D> || is_half_v<S>)
                d[off[0] + i * st[0]] = D(float(v));
              else
                d[off[0] + i * st[0]] = static_cast<D>(v);
            }
          });
    });
  });
}

}  // namespace

#define SPORE_ALL_DTYPES \
  kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
#define SPORE_NUM_DTYPES kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
SPORE_KERNEL(CPU, Gather, gather_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, IndexSelect, index_select_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, ScatterAdd, scatter_add_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, OneHot, one_hot_kernel, kUInt8, kInt8, kInt32,
             kInt64);  // keyed on the index dtype
SPORE_KERNEL(CPU, TopK, topk_kernel, SPORE_NUM_DTYPES);
SPORE_KERNEL(CPU, Sort, sort_kernel, SPORE_NUM_DTYPES);
SPORE_KERNEL(CPU, Cumsum, cumsum_kernel, SPORE_ALL_DTYPES);
SPORE_KERNEL(CPU, Assign, assign_kernel, SPORE_ALL_DTYPES);

}  // namespace spore::cpu
