// The op test table: one row (OpCase) per primitive-and-situation, registered from the family's
// *_cases.cpp file with SPORE_OP_CASES. Three tests walk the table:
//   op_test.cpp       every row, every listed dtype: Spore's kernel vs the row's reference
//                     (plain loops on doubles written in the test, independent of Spore's kernels)
//   grad_test.cpp     finite-difference gradient checks in float64 for differentiable rows
//   registry_test.cpp every primitive in ops.def (and every CPU-private op,
//   backends/cpu/ops/ops.def)
//                     has inference, a gradient rule (unless kNonDiff), a CPU kernel (or a view
//                     rule) and at least one row here
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ops/op.h"
#include "spore/spore.h"

namespace spore::test {

using ops::Tensors;

// How to make one input.
struct InputSpec {
  Shape shape;
  double lo = -1, hi = 1;          // uniform range of the random values
  bool non_contiguous = false;     // build it as the transpose of a contiguous tensor (rank >= 2)
  DType fixed_dtype = DType(255);  // set for inputs whose dtype never varies (indices, masks)
  std::function<Tensor()> make;    // custom input (overrides everything above)
  bool differentiable = true;      // include in the gradient check
};

struct OpCase {
  std::string name;  // unique, "add/broadcast_row"
  ops::OpId op;      // the primitive this row covers
  std::vector<InputSpec> inputs;
  std::function<Tensors(const Tensors&)> run;        // calls Spore's public API
  std::function<Tensors(const Tensors&)> reference;  // independent reference on the same inputs
  std::vector<DType> dtypes = {kFloat32, kFloat64};  // each is run against the reference
  bool grad_check = true;                            // ignored for kNonDiff ops
  double grad_tol = 1e-6;  // relative tolerance of the float64 finite-difference check
  double fd_eps = 1e-6;
};

std::vector<OpCase>& op_cases();
struct CaseRegistrar {
  explicit CaseRegistrar(std::vector<OpCase> cases);
};
#define SPORE_OP_CASES_CAT2(a, b) a##b
#define SPORE_OP_CASES_CAT(a, b) SPORE_OP_CASES_CAT2(a, b)
#define SPORE_OP_CASES(...) \
  static ::spore::test::CaseRegistrar SPORE_OP_CASES_CAT(spore_cases_, __LINE__)(__VA_ARGS__)

// Builds the inputs of a case in dtype `dt` (reproducibly: seeded by the case name).
Tensors make_inputs(const OpCase& c, DType dt);

// Tolerances per dtype, in one place: |a - b| <= atol + rtol * |b|.
struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance(DType dt);

// Reference helpers: values as doubles in row-major order.
std::vector<double> values(const Tensor& t);
Tensor from_values(const std::vector<double>& v, const Shape& shape, DType dt);
Tensor ref_unary(const Tensor& x, const std::function<double(double)>& f,
                 DType out_dtype = DType(255));
Tensor ref_binary(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f,
                  DType out_dtype = DType(255));
// Index of element `flat` of `out_shape` in a tensor of shape `in_shape` broadcast to it.
int64_t broadcast_index(int64_t flat, const Shape& out_shape, const Shape& in_shape);

}  // namespace spore::test
