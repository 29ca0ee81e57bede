// Op-table rows for the view primitives, copy and cast.
#include "backends/test_device/test_device.h"
#include "op_table.h"

namespace spore::test {
namespace {
using ops::OpId;

// Reference for a view: gather elements by explicit index arithmetic on the row-major values.
Tensor ref_permute(const Tensor& x, const std::vector<int64_t>& axes) {
  Shape out_shape;
  for (int64_t a : axes) out_shape.push_back(x.shape()[size_t(a)]);
  std::vector<double> v = values(x), r(v.size());
  const Shape in_st = contiguous_strides(x.shape());
  for (int64_t i = 0; i < int64_t(r.size()); ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = out_shape.size(); d-- > 0;) {
      off += (rem % out_shape[d]) * in_st[size_t(axes[d])];
      rem /= out_shape[d];
    }
    r[size_t(i)] = v[size_t(off)];
  }
  return from_values(r, out_shape, x.dtype());
}

SPORE_OP_CASES({
    {.name = "reshape/merge",
     .op = OpId::Reshape,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = [](const Tensors& x) -> Tensors {
       return {x[0].reshape({6, -1})};
     },
     .reference = [](const Tensors& x) -> Tensors {
       return {from_values(values(x[0]), {6, 4}, x[0].dtype())};
     }},
    {.name = "reshape/non_contiguous",
     .op = OpId::Reshape,
     .inputs = {{.shape = {3, 4}, .non_contiguous = true}},
     .run = [](const Tensors& x) -> Tensors { return {x[0].reshape({12})}; },
     .reference = [](const Tensors& x) -> Tensors {
       return {from_values(values(x[0]), {12}, x[0].dtype())};
     }},
    {.name = "permute/3d",
     .op = OpId::Permute,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = [](const Tensors& x) -> Tensors {
       return {x[0].permute({2, 0, 1})};
     },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_permute(x[0], {2, 0, 1})};
     }},
    {.name = "slice/step2",
     .op = OpId::Slice,
     .inputs = {{.shape = {7, 3}}},
     .run = [](const Tensors& x) -> Tensors { return {x[0].slice(0, 1, 6, 2)}; },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> v = values(x[0]), r;
       for (int i : {1, 3, 5})
         for (int j = 0; j < 3; ++j) r.push_back(v[size_t(i * 3 + j)]);
       return {from_values(r, {3, 3}, x[0].dtype())};
     }},
    {.name = "slice/negative_bounds",
     .op = OpId::Slice,
     .inputs = {{.shape = {2, 6}}},
     .run = [](const Tensors& x) -> Tensors { return {x[0].slice(1, -4, -1)}; },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> v = values(x[0]), r;
       for (int i = 0; i < 2; ++i)
         for (int j = 2; j < 5; ++j) r.push_back(v[size_t(i * 6 + j)]);
       return {from_values(r, {2, 3}, x[0].dtype())};
     }},
    {.name = "expand/row",
     .op = OpId::Expand,
     .inputs = {{.shape = {1, 3}}},
     .run = [](const Tensors& x) -> Tensors {
       return {x[0].expand({2, 4, 3})};
     },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> v = values(x[0]), r;
       for (int i = 0; i < 8; ++i) r.insert(r.end(), v.begin(), v.end());
       return {from_values(r, {2, 4, 3}, x[0].dtype())};
     }},
    {.name = "copy/transposed",
     .op = OpId::Copy,
     .inputs = {{.shape = {3, 5}, .non_contiguous = true}},
     .run = [](const Tensors& x) -> Tensors { return {x[0].contiguous()}; },
     .reference = [](const Tensors& x) -> Tensors {
       return {from_values(values(x[0]), x[0].shape(), x[0].dtype())};
     },
     .dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8}},
    // Large enough for the tiled transpose (copy.cpp): a detector head's (n, a, 85, H, W) ->
    // (n, a, H, W, 85), tiles ragged at both edges, two outer dims.
    {.name = "copy/head_permute",
     .op = OpId::Copy,
     .inputs = {{.shape = {2, 3, 37, 9, 10}}},
     .run = [](const Tensors& x) -> Tensors {
       return {x[0].permute({0, 1, 3, 4, 2}).contiguous()};
     },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_permute(x[0], {0, 1, 3, 4, 2})};
     },
     .dtypes = {kFloat32, kFloat64, kFloat16, kInt64, kUInt8}},
    // A round trip through the test device (a backend with memory of its own): values, strides
    // (a transposed input is packed on its device first) and the gradient coming back.
    {.name = "to_device/roundtrip",
     .op = OpId::ToDevice,
     .inputs = {{.shape = {3, 4}, .non_contiguous = true}},
     .run = [](const Tensors& x) -> Tensors {
       enable_test_device();
       const Device home = x[0].device(),
                    other{home.type == DeviceType::Test ? DeviceType::CPU : DeviceType::Test, 0};
       return {x[0].to(other).to(home) * 1.0};
     },
     .reference = [](const Tensors& x) -> Tensors {
       return {from_values(values(x[0]), x[0].shape(), x[0].dtype())};
     },
     .dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8}},
    {.name = "cast/to_float64",
     .op = OpId::Cast,
     .inputs = {{.shape = {4, 3}, .lo = -5, .hi = 5}},
     .run = [](const Tensors& x) -> Tensors { return {x[0].to(kFloat64) * 1.0}; },
     .reference = [](const Tensors& x) -> Tensors { return {x[0].to(kFloat64)}; },
     .dtypes = {kFloat32, kFloat16, kBFloat16, kInt32, kInt8}},
});

}  // namespace
}  // namespace spore::test
