// How cuBLASLt reads Spore's row-major matmul operands in place, host-side arithmetic only
// (kernels/matmul.cpp runs it; tests/cuda/launch_test.cpp checks it without a GPU by computing
// the product the way cuBLASLt defines it from the same plan).
//
// cuBLASLt is column-major; Spore's C = A B (row-major) is computed as C^T = B^T A^T. A row-major
// matrix's memory is its transpose in column-major order, so a row-major operand is passed as it
// is; one stored by columns (a transposed view: a Dense weight, most backward products) is the
// operand itself in column-major order, passed with the transpose flag. Either may have padded
// rows / columns (ld larger than the matrix), and a batch of matrices one stride apart.
#pragma once
#include <cstdint>
#include <vector>

namespace spore::cuda {

// One row-major (R x C) operand: stored by rows (last stride 1, rows ld >= C apart) or by columns
// (the stride before it 1, columns ld >= R apart); `batches` matrices batch_stride elements apart
// (batches 1: one matrix for every batch of the product). usable is false for any other layout,
// which the kernel copies to a contiguous tensor first.
struct MatmulOperand {
  bool usable = false;
  bool by_columns = false;
  int64_t ld = 0, batches = 1, batch_stride = 0;
};

inline MatmulOperand matmul_operand(const std::vector<int64_t>& shape,
                                    const std::vector<int64_t>& strides) {
  MatmulOperand o;
  const size_t d = shape.size();
  if (d < 2) return o;
  const int64_t R = shape[d - 2], C = shape[d - 1], rs = strides[d - 2], cs = strides[d - 1];
  if (R > 1 && C > 1) {
    if (cs == 1 && rs >= C) {
      o.ld = rs;
    } else if (rs == 1 && cs >= R) {
      o.by_columns = true;
      o.ld = cs;
    } else {
      return o;  // strided both ways, or an expanded dim
    }
  } else if (R == 1 && C == 1) {
    o.ld = 1;
  } else if (C == 1) {  // a column: element i at i * rs
    if (rs < 1) return o;
    o.ld = rs;
  } else {  // a row: element j at j * cs
    if (cs < 1) return o;
    o.by_columns = cs != 1;
    o.ld = cs == 1 ? C : cs;
  }
  // The batch dims (size-1 dims aside) must step by one stride: matrix i at i * batch_stride.
  int64_t expect = -1;
  for (size_t k = d - 2; k-- > 0;) {
    const int64_t n = shape[k], st = strides[k];
    if (n == 1) continue;
    if (expect < 0)
      o.batch_stride = st;
    else if (st != expect)
      return o;
    o.batches *= n;
    expect = st * n;
  }
  if (o.batches > 1 && o.batch_stride == 0) o.batches = 1;  // an expanded batch: one matrix
  o.usable = true;
  return o;
}

// A contiguous row-major (R x C) operand.
inline MatmulOperand contiguous_operand(int64_t C) {
  MatmulOperand o;
  o.usable = true;
  o.ld = C;
  return o;
}

// One cuBLASLt matrix: column-major rows x cols, columns ld elements apart, used transposed or not.
struct LtMatrix {
  int64_t rows, cols, ld;
  bool transposed;
};
// cuBLASLt's D = op(A) op(B) for Spore's C (M x N) = A (M x K) B (K x N): its A is our B, its B
// our A, its D our C (contiguous: N x M, ld N).
struct MatmulPlan {
  LtMatrix a, b, d;
};
inline MatmulPlan matmul_plan(const MatmulOperand& a, const MatmulOperand& b, int64_t M, int64_t N,
                              int64_t K) {
  MatmulPlan p;
  p.a = b.by_columns ? LtMatrix{K, N, b.ld, true} : LtMatrix{N, K, b.ld, false};
  p.b = a.by_columns ? LtMatrix{M, K, a.ld, true} : LtMatrix{K, M, a.ld, false};
  p.d = {N, M, N, false};
  return p;
}

}  // namespace spore::cuda
