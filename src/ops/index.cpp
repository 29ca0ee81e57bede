// Indexing primitives: Gather (torch.gather), IndexSelect, ScatterAdd, OneHot, TopK, Sort, Cumsum
// and the in-place Assign — inference, gradient rules and the public functions (argsort is
// sort's indices). Kernels: backends/cpu/kernels/index.cpp. Index tensors are any integer dtype;
// out-of-range index values are IndexErrors raised by the kernels.
#include <algorithm>

#include "ops/op.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {

void check_index_dtype(DType t, const char* what) {
  SPORE_CHECK_TYPE(is_integral(t), what, " must be an integer tensor, got dtype ", dtype_name(t));
}

// gather / scatter_add: index has x's rank; index.size(d) <= x.size(d) except along the axis.
void check_index_shape(const Shape& x, const Shape& idx, int64_t ax, const char* xname) {
  SPORE_CHECK(idx.size() == x.size(), "index of shape ", shape_str(idx), " must have the rank of ",
              xname, " ", shape_str(x));
  for (size_t d = 0; d < x.size(); ++d)
    SPORE_CHECK(int64_t(d) == ax || idx[d] <= x[d], "index of shape ", shape_str(idx),
                " is larger than ", xname, " ", shape_str(x), " in dimension ", d);
}

Metas sort_like_infer(const Shape& s, DType dt, int64_t axis, int64_t k) {
  Shape o = s;
  if (!o.empty()) o[size_t(normalize_axis(axis, int64_t(s.size())))] = k;
  return {{o, dt}, {o, kInt64}};
}

// Values' cotangent goes back to the positions it was taken from.
Tensors scatter_back(const VjpContext& c) {
  const int64_t ax = c.attrs.get_int("axis");
  if (c.in(0).dim() == 0) return {c.g()};
  return {scatter_add(zeros_like(c.in(0)), ax, c.out(1), c.g())};
}

}  // namespace

SPORE_DEFINE_OP(Gather, {
                            .infer = [](const Metas& in, const Attrs& a) -> Metas {
                              check_index_dtype(in[1].dtype, "index");
                              const int64_t ax =
                                  normalize_axis(a.get_int("axis"), int64_t(in[0].shape.size()));
                              check_index_shape(in[0].shape, in[1].shape, ax, "input");
                              return {{in[1].shape, in[0].dtype}};
                            },
                            .vjp = [](const VjpContext& c) -> Tensors {
                              return {scatter_add(zeros_like(c.in(0)), c.attrs.get_int("axis"),
                                                  c.in(1), c.g()),
                                      Tensor()};
                            },
                        });

SPORE_DEFINE_OP(
    IndexSelect,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          check_index_dtype(in[1].dtype, "index");
          SPORE_CHECK(in[1].shape.size() <= 1, "index must be 1-d, got shape ",
                      shape_str(in[1].shape));
          Shape o = in[0].shape;
          const int64_t ax = normalize_axis(a.get_int("axis"), int64_t(o.size()));
          if (!o.empty()) o[size_t(ax)] = shape_numel(in[1].shape);
          return {{o, in[0].dtype}};
        },
        // index_add of g into zeros: scatter_add with the index broadcast along the other dims.
        .vjp = [](const VjpContext& c) -> Tensors {
          const Tensor& x = c.in(0);
          if (x.dim() == 0) return {c.g().reshape({}), Tensor()};
          const int64_t ax = normalize_axis(c.attrs.get_int("axis"), x.dim());
          Shape s(size_t(x.dim()), 1);
          s[size_t(ax)] = c.in(1).numel();
          Tensor idx = c.in(1).reshape(s).expand(c.g().shape());
          return {scatter_add(zeros_like(x), ax, idx, c.g()), Tensor()};
        },
    });

SPORE_DEFINE_OP(ScatterAdd,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      check_index_dtype(in[1].dtype, "index");
                      SPORE_CHECK_TYPE(in[2].dtype == in[0].dtype, "src dtype ",
                                       dtype_name(in[2].dtype), " differs from input dtype ",
                                       dtype_name(in[0].dtype));
                      const int64_t ax =
                          normalize_axis(a.get_int("axis"), int64_t(in[0].shape.size()));
                      check_index_shape(in[0].shape, in[1].shape, ax, "input");
                      check_index_shape(in[2].shape, in[1].shape, -1, "src");
                      return {in[0]};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      const int64_t ax = c.attrs.get_int("axis");
                      Tensor gs = gather(c.g(), ax, c.in(1));
                      if (gs.shape() !=
                          c.in(2).shape()) {  // src elements outside the index region get zero
                        std::vector<int64_t> pads;
                        for (int64_t d = c.in(2).dim() - 1; d >= 0; --d) {
                          pads.push_back(0);
                          pads.push_back(c.in(2).size(d) - gs.size(d));
                        }
                        gs = pad(gs, pads, 0);
                      }
                      return {c.g(), Tensor(), gs};
                    },
                });

SPORE_DEFINE_OP(OneHot, {
                            .infer = [](const Metas& in, const Attrs& a) -> Metas {
                              check_index_dtype(in[0].dtype, "index");
                              const int64_t depth = a.get_int("depth");
                              SPORE_CHECK(depth > 0, "depth must be positive, got ", depth);
                              Shape o = in[0].shape;
                              o.push_back(depth);
                              return {{o, a.get_dtype("dtype")}};
                            },
                        });

SPORE_DEFINE_OP(TopK, {
                          .infer = [](const Metas& in, const Attrs& a) -> Metas {
                            const Shape& s = in[0].shape;
                            const int64_t ax = normalize_axis(a.get_int("axis"), int64_t(s.size()));
                            const int64_t n = s.empty() ? 1 : s[size_t(ax)], k = a.get_int("k");
                            SPORE_CHECK(k >= 0 && k <= n, "k = ", k,
                                        " is out of range for dimension ", ax, " of size ", n,
                                        " (input shape ", shape_str(s), ")");
                            return sort_like_infer(s, in[0].dtype, ax, k);
                          },
                          .vjp = scatter_back,
                      });

SPORE_DEFINE_OP(Sort, {
                          .infer = [](const Metas& in, const Attrs& a) -> Metas {
                            const Shape& s = in[0].shape;
                            const int64_t ax = normalize_axis(a.get_int("axis"), int64_t(s.size()));
                            return sort_like_infer(s, in[0].dtype, ax,
                                                   s.empty() ? 1 : s[size_t(ax)]);
                          },
                          .vjp = scatter_back,
                      });

SPORE_DEFINE_OP(Cumsum,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      normalize_axis(a.get_int("axis"), int64_t(in[0].shape.size()));
                      return {{in[0].shape, is_floating(in[0].dtype) ? in[0].dtype : kInt64}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {call1(OpId::Cumsum, {c.g()},
                                    Attrs()
                                        .set("axis", c.attrs.get_int("axis"))
                                        .set("reverse", !c.attrs.get_bool("reverse")))};
                    },
                });

SPORE_DEFINE_OP(Assign, {
                            .infer = [](const Metas& in, const Attrs&) -> Metas {
                              const Shape b = broadcast_shapes(in[0].shape, in[1].shape);
                              SPORE_CHECK(b == in[0].shape, "cannot assign a value of shape ",
                                          shape_str(in[1].shape), " to a tensor of shape ",
                                          shape_str(in[0].shape));
                              return {};
                            },
                        });

}  // namespace spore::ops

namespace spore {
using ops::Attrs;
using ops::OpId;
using ops::Tensors;

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  return ops::call1(OpId::Gather, {x, index}, Attrs().set("axis", axis));
}
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  return ops::call1(OpId::IndexSelect, {x, index}, Attrs().set("axis", axis));
}
Tensor scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  return ops::call1(OpId::ScatterAdd, {x, index, src.to(x.dtype())}, Attrs().set("axis", axis));
}
Tensor one_hot(const Tensor& index, int64_t depth, DType dtype) {
  return ops::call1(OpId::OneHot, {index}, Attrs().set("depth", depth).set("dtype", dtype));
}
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis, bool largest,
                               bool sorted) {
  Tensors r = ops::call(
      OpId::TopK, {x},
      Attrs().set("k", k).set("axis", axis).set("largest", largest).set("sorted", sorted));
  return {r[0], r[1]};
}
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t axis, bool descending) {
  Tensors r = ops::call(OpId::Sort, {x}, Attrs().set("axis", axis).set("descending", descending));
  return {r[0], r[1]};
}
Tensor argsort(const Tensor& x, int64_t axis, bool descending) {
  return sort(x, axis, descending).second;
}
Tensor cumsum(const Tensor& x, int64_t axis) {
  return ops::call1(OpId::Cumsum, {x}, Attrs().set("axis", axis).set("reverse", false));
}
void assign(const Tensor& dst, const Tensor& src) { ops::call(OpId::Assign, {dst, src}); }

}  // namespace spore
