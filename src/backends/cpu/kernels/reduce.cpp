// CPU kernels for the reductions (Sum, Mean, Max, Min, Prod, Argmax, Argmin).
//
// A reduction is planned once: size-1 dims are dropped, the kept dims (output order) and the
// reduced dims are each merged where their input strides allow, and the reduced dims are ordered
// so the innermost has the smallest stride. Two loops then cover every case:
//   inner reduction  the innermost reduced dim is the fastest in memory (e.g. sum over the last
//                    axis): each output folds rows with several independent accumulators
//   outer reduction  the innermost kept dim is contiguous and faster than every reduced dim (e.g.
//                    a bias gradient: sum over the batch of (N, C)): a block of outputs is
//                    accumulated together, one contiguous input row at a time (vectorises)
// Outputs are independent, so both loops split outputs across threads: results do not depend on
// the thread count. float16/bfloat16 accumulate in float32. To add a reduction: a functor like
// SumOp (init, step, merge, finish) and one SPORE_KERNEL line.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/strided.h"
#include "ops/op.h"

namespace spore::cpu {
namespace {

struct Plan {
  std::vector<int64_t> ksize,
      kstride;  // kept dims, outer to inner (output is contiguous over them)
  std::vector<int64_t> rsize, rstride;  // reduced dims, innermost has the smallest stride
  int64_t nout = 1, nred = 1;
};

// Reduces over the dims flagged in `red` (size x.dim()).
Plan make_plan(const Tensor& x, const std::vector<bool>& red) {
  Plan p;
  std::vector<std::pair<int64_t, int64_t>> r;  // (size, stride)
  for (size_t d = 0; d < size_t(x.dim()); ++d) {
    const int64_t n = x.shape()[d], st = x.strides()[d];
    if (red[d])
      p.nred *= n;
    else
      p.nout *= n;
    if (n == 1) continue;
    if (red[d]) {
      r.push_back({n, st});
    } else if (!p.ksize.empty() && p.kstride.back() == st * n) {
      p.ksize.back() *= n;
      p.kstride.back() = st;
    } else {
      p.ksize.push_back(n);
      p.kstride.push_back(st);
    }
  }
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [n, st] : r) {
    if (!p.rsize.empty() && p.rstride.back() == st * n) {
      p.rsize.back() *= n;
      p.rstride.back() = st;
    } else {
      p.rsize.push_back(n);
      p.rstride.push_back(st);
    }
  }
  return p;
}

// Walks a multi-index over (size, stride) dims, tracking the element offset.
struct Odometer {
  const int64_t* size;
  const int64_t* stride;
  int nd;
  int64_t idx[kMaxDims] = {0};
  int64_t off = 0;
  Odometer(const std::vector<int64_t>& s, const std::vector<int64_t>& st, int ndims)
      : size(s.data()), stride(st.data()), nd(ndims) {}
  void seek(int64_t flat) {
    off = 0;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = flat % size[d];
      flat /= size[d];
      off += idx[d] * stride[d];
    }
  }
  void next() {
    for (int d = nd - 1; d >= 0; --d) {
      off += stride[d];
      if (++idx[d] < size[d]) return;
      off -= idx[d] * stride[d];
      idx[d] = 0;
    }
  }
};

// Accumulator type: float for the half types, double for double, int64 for integers and bool.
template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, T,
                                 std::conditional_t<is_half_v<T>, float, int64_t>>;

template <typename T, typename Acc>
inline Acc load(T v) {
  if constexpr (is_half_v<T>)
    return Acc(float(v));
  else
    return Acc(v);
}
template <typename Out, typename Acc>
inline Out store(Acc v) {
  if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>)
    return Out(float(v));
  else
    return static_cast<Out>(v);
}

template <typename Acc>
struct SumOp {
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, Acc v) { return a + v; }
  static Acc merge(Acc a, Acc b) { return a + b; }
};
template <typename Acc>
struct ProdOp {
  static Acc init() { return Acc(1); }
  static Acc step(Acc a, Acc v) { return a * v; }
  static Acc merge(Acc a, Acc b) { return a * b; }
};
// NaN propagates (as numpy/PyTorch): `v != v` is false for integers.
template <typename Acc>
struct MaxOp {
  static Acc init() { return std::numeric_limits<Acc>::lowest(); }
  static Acc step(Acc a, Acc v) { return (v > a || v != v) ? v : a; }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
};
template <typename Acc>
struct MinOp {
  static Acc init() {
    if constexpr (std::is_floating_point_v<Acc>)
      return std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::max();
  }
  static Acc step(Acc a, Acc v) { return (v < a || v != v) ? v : a; }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
};
template <typename Acc>
struct MaxOpF : MaxOp<Acc> {
  static Acc init() { return -std::numeric_limits<Acc>::infinity(); }
};

// Folds n elements at stride st; 8 independent accumulators let the contiguous case vectorise.
template <typename Op, typename Acc, typename T>
Acc fold_row(const T* p, int64_t n, int64_t st) {
  constexpr int kLanes = 8;
  Acc acc = Op::init();
  int64_t i = 0;
  if (st == 1 && n >= 2 * kLanes) {
    Acc lane[kLanes];
    for (int k = 0; k < kLanes; ++k) lane[k] = Op::init();
    for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
      for (int k = 0; k < kLanes; ++k) lane[k] = Op::step(lane[k], load<T, Acc>(p[i + k]));
    }
    for (int k = 0; k < kLanes; ++k) acc = Op::merge(acc, lane[k]);
  }
  for (; i < n; ++i) acc = Op::step(acc, load<T, Acc>(p[i * st]));
  return acc;
}

// finish(acc) -> Out: identity for sum/max/min/prod, divide by the count for mean.
template <typename Op, typename T, typename Out, typename Acc, typename Finish>
void reduce(const Tensor& x, Tensor& out, const std::vector<bool>& red, Finish finish) {
  const Plan p = make_plan(x, red);
  const T* src = base<T>(x);
  Out* dst = base<Out>(out);
  const int nk = int(p.ksize.size()), nr = int(p.rsize.size());
  if (p.nout == 0) return;
  if (p.nred == 0) {  // empty slices: the identity
    for (int64_t o = 0; o < p.nout; ++o) dst[o] = finish(Op::init());
    return;
  }
  const bool outer = nk > 0 && nr > 0 && p.kstride.back() == 1 && p.rstride.back() > 1;
  if (outer) {
    // (..., K) outputs, contiguous in the input: accumulate a block of K at once.
    constexpr int64_t kBlock = 2048;  // accumulators stay in L1
    const int64_t klast = p.ksize.back(), nko = p.nout / klast;
    const int64_t nblk = (klast + kBlock - 1) / kBlock;
    const int64_t grain = std::max<int64_t>(1, 65536 / (p.nred * std::min(klast, kBlock)));
    parallel_for(0, nko * nblk, grain, [&](int64_t t0, int64_t t1) {
      Acc acc[kBlock];
      Odometer ko(p.ksize, p.kstride, nk - 1);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t kouter = t / nblk, j0 = (t % nblk) * kBlock,
                      len = std::min(kBlock, klast - j0);
        ko.seek(kouter);
        const T* b = src + ko.off + j0;
        for (int64_t j = 0; j < len; ++j) acc[j] = Op::init();
        Odometer r(p.rsize, p.rstride, nr);
        for (int64_t i = 0; i < p.nred; ++i, r.next()) {
          const T* row = b + r.off;
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) acc[j] = Op::step(acc[j], load<T, Acc>(row[j]));
        }
        Out* o = dst + kouter * klast + j0;
        for (int64_t j = 0; j < len; ++j) o[j] = finish(acc[j]);
      }
    });
    return;
  }
  // Inner reduction: each output folds nred / n rows of n elements.
  const int64_t n = nr ? p.rsize.back() : 1, st = nr ? p.rstride.back() : 0;
  const int64_t rows = p.nred / n;
  const int64_t grain = std::max<int64_t>(1, 32768 / p.nred);
  parallel_for(0, p.nout, grain, [&](int64_t o0, int64_t o1) {
    Odometer k(p.ksize, p.kstride, nk);
    k.seek(o0);
    for (int64_t o = o0; o < o1; ++o, k.next()) {
      Acc acc = Op::init();
      Odometer r(p.rsize, p.rstride, nr - 1);
      for (int64_t i = 0; i < rows; ++i, r.next())
        acc = Op::merge(acc, fold_row<Op, Acc>(src + k.off + r.off, n, st));
      dst[o] = finish(acc);
    }
  });
}

std::vector<bool> reduced_dims(const ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  std::vector<int64_t> axes = ops::normalize_axes(ctx.attrs.get_ints("axes", {}), x.dim());
  std::vector<bool> red(size_t(x.dim()), axes.empty());
  for (int64_t a : axes)
    if (a < x.dim()) red[size_t(a)] = true;
  return red;
}

template <template <typename> class OpT>
void accumulate_kernel(ops::KernelContext& ctx, bool is_mean) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const auto red = reduced_dims(ctx);
  int64_t count = 1;
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) count *= x.shape()[d];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kFloatIn = !std::is_same_v<AccOf<T>, int64_t>;
    if (is_mean) {
      // Integer means accumulate in double and produce float32 (see ops/reduce.cpp).
      using Acc = std::conditional_t<kFloatIn, AccOf<T>, double>;
      using Out = std::conditional_t<kFloatIn, T, float>;
      SPORE_ASSERT(out.dtype() == dtype_of_v<Out>, "mean output dtype");
      const Acc inv = Acc(1) / Acc(std::max<int64_t>(count, 1));
      const bool empty = count == 0;
      reduce<OpT<Acc>, T, Out, Acc>(
          x, out, red, [inv, empty](Acc a) { return store<Out, Acc>(empty ? Acc(NAN) : a * inv); });
    } else {
      // Integer sums and products produce int64.
      using Acc = AccOf<T>;
      using Out = std::conditional_t<kFloatIn, T, int64_t>;
      SPORE_ASSERT(out.dtype() == dtype_of_v<Out>, "sum output dtype");
      reduce<OpT<Acc>, T, Out, Acc>(x, out, red, [](Acc a) { return store<Out, Acc>(a); });
    }
  });
}

void sum_kernel(ops::KernelContext& ctx) { accumulate_kernel<SumOp>(ctx, false); }
void mean_kernel(ops::KernelContext& ctx) { accumulate_kernel<SumOp>(ctx, true); }
void prod_kernel(ops::KernelContext& ctx) { accumulate_kernel<ProdOp>(ctx, false); }

template <bool kMax>
void extremum_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const auto red = reduced_dims(ctx);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Max/min are exact, so only the half types need a wider accumulator; bool compares as int.
    using Acc = std::conditional_t<is_half_v<T>, float,
                                   std::conditional_t<std::is_same_v<T, bool>, int64_t, T>>;
    using Op = std::conditional_t<
        kMax, std::conditional_t<std::is_floating_point_v<Acc>, MaxOpF<Acc>, MaxOp<Acc>>,
        MinOp<Acc>>;
    reduce<Op, T, T, Acc>(x, out, red, [](Acc a) { return store<T, Acc>(a); });
  });
}

// Argmax/argmin over one axis: the first extremal position (NaN counts as the extremum).
template <bool kMax>
void arg_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const int64_t axis = ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim());
  std::vector<bool> red(size_t(x.dim()), false);
  if (x.dim() > 0) red[size_t(axis)] = true;
  const Plan p = make_plan(x, red);
  const int64_t n = p.rsize.empty() ? 1 : p.rsize[0], st = p.rsize.empty() ? 0 : p.rstride[0];
  int64_t* dst = base<int64_t>(out);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<is_half_v<T>, float,
                                   std::conditional_t<std::is_same_v<T, bool>, int64_t, T>>;
    const T* src = base<T>(x);
    parallel_for(0, p.nout, std::max<int64_t>(1, 32768 / n), [&](int64_t o0, int64_t o1) {
      Odometer k(p.ksize, p.kstride, int(p.ksize.size()));
      k.seek(o0);
      for (int64_t o = o0; o < o1; ++o, k.next()) {
        const T* row = src + k.off;
        Acc best = load<T, Acc>(row[0]);
        int64_t bi = 0;
        for (int64_t i = 1; i < n && best == best; ++i) {
          const Acc v = load<T, Acc>(row[i * st]);
          if (kMax ? (v > best || v != v) : (v < best || v != v)) {
            best = v;
            bi = i;
          }
        }
        dst[o] = bi;
      }
    });
  });
}

}  // namespace

#define SPORE_REDUCE_DTYPES \
  kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
SPORE_KERNEL(CPU, Sum, sum_kernel, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(CPU, Mean, mean_kernel, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(CPU, Prod, prod_kernel, kUInt8, kInt8, kInt32, kInt64, kFloat32, kFloat64);
SPORE_KERNEL(CPU, Max, extremum_kernel<true>, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(CPU, Min, extremum_kernel<false>, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(CPU, Argmax, arg_kernel<true>, SPORE_REDUCE_DTYPES);
SPORE_KERNEL(CPU, Argmin, arg_kernel<false>, SPORE_REDUCE_DTYPES);

}  // namespace spore::cpu
