// Softmax family and shape-changing copies: Softmax, LogSoftmax, Concat, Split, Pad, Dropout,
// UpsampleNearest2d (+ its backward) — inference, gradient rules and the public functions, plus
// the composites stack and chunk. Kernels: backends/cpu/kernels/index_shape.cpp.
// The indexing primitives (gather, scatter, sort...) are in ops/index.cpp.
#include <algorithm>

#include "ops/op.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {

Metas softmax_infer(const Metas& in, const Attrs& a) {
  SPORE_CHECK_TYPE(is_floating(in[0].dtype), "expected a floating-point input, got ",
                   dtype_name(in[0].dtype));
  normalize_axis(a.get_int("axis"), int64_t(in[0].shape.size()));
  return {in[0]};
}

// Output sizes of pad: `pads` holds (before, after) pairs starting from the last dim.
Shape padded_shape(const Shape& s, const std::vector<int64_t>& pads) {
  SPORE_CHECK(pads.size() % 2 == 0, "pads must hold (before, after) pairs, got ", pads.size(),
              " values ", shape_str(pads));
  SPORE_CHECK(pads.size() <= 2 * s.size(), "pads ", shape_str(pads), " cover ", pads.size() / 2,
              " dims but the input ", shape_str(s), " has only ", s.size());
  Shape out = s;
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t d = s.size() - 1 - k;
    out[d] = s[d] + pads[2 * k] + pads[2 * k + 1];
    SPORE_CHECK(out[d] >= 0, "pads ", shape_str(pads), " shrink dimension ", d, " of input ",
                shape_str(s), " below zero");
  }
  return out;
}

}  // namespace

SPORE_DEFINE_OP(Softmax, {
                             .infer = softmax_infer,
                             .vjp = [](const VjpContext& c) -> Tensors {  // y * (g - sum(g * y))
                               const int64_t ax = c.attrs.get_int("axis");
                               const Tensor& y = c.out(0);
                               return {mul(y, sub(c.g(), sum(mul(c.g(), y), {ax}, true)))};
                             },
                         });

SPORE_DEFINE_OP(LogSoftmax, {
                                .infer = softmax_infer,
                                .vjp = [](const VjpContext& c) -> Tensors {  // g - softmax * sum(g)
                                  const int64_t ax = c.attrs.get_int("axis");
                                  return {sub(c.g(), mul(exp(c.out(0)), sum(c.g(), {ax}, true)))};
                                },
                            });

SPORE_DEFINE_OP(Concat,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      SPORE_CHECK(!in.empty(), "expected at least one tensor");
                      const Shape& s0 = in[0].shape;
                      SPORE_CHECK(!s0.empty(), "cannot concatenate 0-d tensors (use stack)");
                      const int64_t ax = normalize_axis(a.get_int("axis"), int64_t(s0.size()));
                      Shape out = s0;
                      out[size_t(ax)] = 0;
                      for (size_t i = 0; i < in.size(); ++i) {
                        const Shape& s = in[i].shape;
                        SPORE_CHECK_TYPE(in[i].dtype == in[0].dtype, "input ", i, " has dtype ",
                                         dtype_name(in[i].dtype), " but input 0 has ",
                                         dtype_name(in[0].dtype));
                        bool ok = s.size() == s0.size();
                        for (size_t d = 0; ok && d < s.size(); ++d)
                          ok = int64_t(d) == ax || s[d] == s0[d];
                        SPORE_CHECK(ok, "input ", i, " has shape ", shape_str(s),
                                    " but input 0 has shape ", shape_str(s0),
                                    ": all dims except axis ", ax, " must match");
                        out[size_t(ax)] += s[size_t(ax)];
                      }
                      return {{out, in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      const int64_t ax = normalize_axis(c.attrs.get_int("axis"), c.in(0).dim());
                      Tensors grads;
                      int64_t start = 0;
                      for (const Tensor& x : c.inputs) {
                        const int64_t n = x.size(ax);
                        grads.push_back(c.g().slice(ax, start, start + n));
                        start += n;
                      }
                      return grads;
                    },
                });

SPORE_DEFINE_OP(Split, {
                           .infer = [](const Metas& in, const Attrs& a) -> Metas {
                             const Shape& s = in[0].shape;
                             const int64_t ax =
                                 normalize_axis(a.get_int("axis"), int64_t(s.size()));
                             SPORE_CHECK(!s.empty(), "cannot split a 0-d tensor");
                             const auto& sizes = a.get_ints("sizes");
                             int64_t total = 0;
                             Metas out;
                             for (int64_t n : sizes) {
                               SPORE_CHECK(n >= 0, "split sizes must be non-negative, got ",
                                           shape_str(sizes));
                               total += n;
                               Shape o = s;
                               o[size_t(ax)] = n;
                               out.push_back({o, in[0].dtype});
                             }
                             SPORE_CHECK(total == s[size_t(ax)], "split sizes ", shape_str(sizes),
                                         " add up to ", total, " but dimension ", ax, " of shape ",
                                         shape_str(s), " has size ", s[size_t(ax)]);
                             return out;
                           },
                           .vjp = [](const VjpContext& c) -> Tensors {
                             return {concat(c.cotangents, c.attrs.get_int("axis"))};
                           },
                       });

SPORE_DEFINE_OP(Pad, {
                         .infer = [](const Metas& in, const Attrs& a) -> Metas {
                           return {{padded_shape(in[0].shape, a.get_ints("pads")), in[0].dtype}};
                         },
                         // The gradient of padding by p is cropping by p: pad with -p.
                         .vjp = [](const VjpContext& c) -> Tensors {
                           std::vector<int64_t> neg = c.attrs.get_ints("pads");
                           for (int64_t& p : neg) p = -p;
                           return {pad(c.g(), neg, 0)};
                         },
                     });

SPORE_DEFINE_OP(Dropout,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      SPORE_CHECK_TYPE(is_floating(in[0].dtype),
                                       "expected a floating-point input, got ",
                                       dtype_name(in[0].dtype));
                      const double p = a.get_float("p");
                      SPORE_CHECK(p >= 0 && p <= 1, "p must be in [0, 1], got ", p);
                      return {in[0], {in[0].shape, kUInt8}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      const double p = c.attrs.get_float("p");
                      if (p >= 1) return {zeros_like(c.g())};
                      return {mul(c.g(), cast(c.out(1), c.g().dtype())) * (1.0 / (1.0 - p))};
                    },
                });

SPORE_DEFINE_OP(UpsampleNearest2d,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      const Shape& s = in[0].shape;
                      SPORE_CHECK(s.size() == 4,
                                  "expected input of rank 4 (N, C, H, W), got shape ",
                                  shape_str(s));
                      const auto& os = a.get_ints("output_size");
                      SPORE_CHECK(os.size() == 2 && os[0] > 0 && os[1] > 0,
                                  "output_size must be two positive sizes (H, W), got ",
                                  shape_str(os));
                      return {{{s[0], s[1], os[0], os[1]}, in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {call1(OpId::UpsampleNearest2dBackward, {c.g()},
                                    Attrs().set("input_shape", c.in(0).shape()))};
                    },
                });

SPORE_DEFINE_OP(UpsampleNearest2dBackward,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      const Shape& g = in[0].shape;
                      const Shape& xs = a.get_ints("input_shape");
                      SPORE_CHECK(g.size() == 4 && xs.size() == 4 && g[0] == xs[0] && g[1] == xs[1],
                                  "gradient of shape ", shape_str(g),
                                  " does not match input shape ", shape_str(xs));
                      return {{xs, in[0].dtype}};
                    },
                });

}  // namespace spore::ops

namespace spore {
using ops::Attrs;
using ops::OpId;

Tensor softmax(const Tensor& x, int64_t axis) {
  return ops::call1(OpId::Softmax, {x}, Attrs().set("axis", axis));
}
Tensor log_softmax(const Tensor& x, int64_t axis) {
  return ops::call1(OpId::LogSoftmax, {x}, Attrs().set("axis", axis));
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  SPORE_CHECK(!xs.empty(), "[concat] expected at least one tensor");
  DType dt = xs[0].dtype();
  for (const Tensor& x : xs) dt = promote_types(dt, x.dtype());
  std::vector<Tensor> in;
  for (const Tensor& x : xs) in.push_back(x.to(dt));
  if (in.size() == 1) return in[0];
  return ops::call1(OpId::Concat, std::move(in), Attrs().set("axis", axis));
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  SPORE_CHECK(!xs.empty(), "[stack] expected at least one tensor");
  for (size_t i = 1; i < xs.size(); ++i)
    SPORE_CHECK(xs[i].shape() == xs[0].shape(), "[stack] tensor ", i, " has shape ",
                shape_str(xs[i].shape()), " but tensor 0 has shape ", shape_str(xs[0].shape()));
  const int64_t ax = ops::normalize_axis(axis, xs[0].dim() + 1);
  std::vector<Tensor> u;
  for (const Tensor& x : xs) u.push_back(x.unsqueeze(ax));
  return concat(u, ax);
}

std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t axis) {
  return ops::call(OpId::Split, {x}, Attrs().set("axis", axis).set("sizes", std::move(sizes)));
}

// As torch.chunk: pieces of ceil(n / chunks), the last one smaller (so maybe fewer than chunks).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) {
  SPORE_CHECK(chunks > 0, "[chunk] chunks must be positive, got ", chunks);
  const int64_t n = x.size(axis), piece = std::max<int64_t>(1, (n + chunks - 1) / chunks);
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += piece) sizes.push_back(std::min(piece, n - start));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, axis);
}

Tensor pad(const Tensor& x, std::vector<int64_t> pads, double value) {
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
      pads.size() <= 2 * size_t(x.dim()))
    return x;
  return ops::call1(OpId::Pad, {x}, Attrs().set("pads", std::move(pads)).set("value", value));
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!training || p == 0) return x;
  return ops::call(OpId::Dropout, {x}, Attrs().set("p", p))[0];
}

Tensor upsample_nearest2d(const Tensor& x, std::vector<int64_t> output_size) {
  return ops::call1(OpId::UpsampleNearest2d, {x},
                    Attrs().set("output_size", std::move(output_size)));
}

}  // namespace spore
