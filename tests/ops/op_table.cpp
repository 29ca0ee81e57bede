// Shared machinery of the op table: registration, input generation, tolerances, reference helpers.
#include "op_table.h"

#include <cmath>

namespace spore::test {

std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}
CaseRegistrar::CaseRegistrar(std::vector<OpCase> cases) {
  for (auto& c : cases) op_cases().push_back(std::move(c));
}

Tensors make_inputs(const OpCase& c, DType dt) {
  set_seed(std::hash<std::string>()(c.name) & 0xffffffff);
  Tensors out;
  for (const InputSpec& s : c.inputs) {
    if (s.make) {
      Tensor t = s.make();
      if (s.fixed_dtype == DType(255) && is_floating(t.dtype()) && t.dtype() != dt) t = t.to(dt);
      out.push_back(t);
      continue;
    }
    const DType t_dt = s.fixed_dtype == DType(255) ? dt : s.fixed_dtype;
    Shape shape = s.shape;
    if (s.non_contiguous && shape.size() >= 2)
      std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    Tensor t = uniform(shape, s.lo, s.hi, kFloat64);
    if (!is_floating(t_dt)) t = floor(t);
    t = t.to(t_dt);
    if (s.non_contiguous && shape.size() >= 2) t = t.transpose(-1, -2);
    out.push_back(t);
  }
  return out;
}

Tolerance tolerance(DType dt) {
  switch (dt) {
    case kFloat64:
      return {1e-10, 1e-10};
    case kFloat32:
      return {1e-5, 1e-5};
    case kFloat16:
      return {1e-2, 1e-2};
    case kBFloat16:
      return {2e-2, 2e-2};
    default:
      return {0, 0};
  }
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

Tensor from_values(const std::vector<double>& v, const Shape& shape, DType dt) {
  return from_vector(v, shape).to(dt);
}

int64_t broadcast_index(int64_t flat, const Shape& out_shape, const Shape& in_shape) {
  int64_t idx = 0, stride = 1;
  const size_t off = out_shape.size() - in_shape.size();
  for (size_t d = out_shape.size(); d-- > 0;) {
    const int64_t coord = flat % out_shape[d];
    flat /= out_shape[d];
    if (d >= off) {
      const int64_t n = in_shape[d - off];
      if (n != 1) idx += coord * stride;
      stride *= n;
    }
  }
  return idx;
}

Tensor ref_unary(const Tensor& x, const std::function<double(double)>& f, DType out_dtype) {
  std::vector<double> v = values(x);
  for (double& e : v) e = f(e);
  return from_values(v, x.shape(), out_dtype == DType(255) ? x.dtype() : out_dtype);
}

Tensor ref_binary(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f,
                  DType out_dtype) {
  const Shape out = ops::broadcast_shapes(a.shape(), b.shape());
  std::vector<double> va = values(a), vb = values(b), r(size_t(shape_numel(out)));
  for (int64_t i = 0; i < int64_t(r.size()); ++i)
    r[size_t(i)] = f(va[size_t(broadcast_index(i, out, a.shape()))],
                     vb[size_t(broadcast_index(i, out, b.shape()))]);
  return from_values(r, out,
                     out_dtype == DType(255) ? promote_types(a.dtype(), b.dtype()) : out_dtype);
}

}  // namespace spore::test
