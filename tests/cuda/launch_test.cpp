// Launch-shape arithmetic of the CUDA kernels (src/backends/cuda/launch.h), without a GPU: grid
// sizes, the merging of operand dims into the fewest an elementwise kernel indexes, reduction
// plans, and how cuBLASLt reads matmul operands in place.
#include <gtest/gtest.h>

#include "backends/cuda/launch.h"
#include "backends/cuda/matmul_plan.h"
#include "backends/cuda/reduce_plan.h"
#include "spore/spore.h"

namespace {
using namespace spore::cuda;

TEST(CudaLaunch, GridCoversTheWorkAndIsCapped) {
  EXPECT_EQ(launch_1d(0).blocks, 1u);
  EXPECT_EQ(launch_1d(1).blocks, 1u);
  EXPECT_EQ(launch_1d(256).blocks, 1u);
  EXPECT_EQ(launch_1d(257).blocks, 2u);
  EXPECT_EQ(launch_1d(1024, 4).blocks, 1u);
  EXPECT_EQ(launch_1d(int64_t(1) << 40).blocks, 132u * 32u);  // grid-stride beyond the cap
  EXPECT_EQ(launch_1d(1 << 20).threads, 256u);
}

TEST(CudaLaunch, DimsMergeWhenEveryOperandIsContiguousAcrossThem) {
  const int64_t sizes[3] = {4, 5, 6};
  int64_t contiguous[1][kMaxDims * 2] = {{30, 6, 1}};
  StridedIndex<1> ix;
  ASSERT_TRUE(make_index<1>(sizes, 3, contiguous, ix));
  EXPECT_EQ(ix.ndim, 1);
  EXPECT_EQ(ix.size[0], 120);
  EXPECT_EQ(ix.stride[0][0], 1);
  // A transposed operand keeps its dims apart; a broadcast one (stride 0) merges with nothing.
  int64_t two[2][kMaxDims * 2] = {{30, 6, 1}, {0, 1, 5}};
  StridedIndex<2> iy;
  ASSERT_TRUE(make_index<2>(sizes, 3, two, iy));
  EXPECT_EQ(iy.ndim, 3);
  // Size-1 dims vanish.
  const int64_t ones[4] = {1, 7, 1, 3};
  int64_t st[1][kMaxDims * 2] = {{21, 3, 3, 1}};
  StridedIndex<1> iz;
  ASSERT_TRUE(make_index<1>(ones, 4, st, iz));
  EXPECT_EQ(iz.ndim, 1);
  EXPECT_EQ(iz.size[0], 21);
}

// Reductions: kept and reduced dims merged, the mode from the strides, the split of the reduced
// range when there are few outputs.
TEST(CudaReducePlan, SumOverTheLastAxisIsWarpModeOverTheFirstThreadMode) {
  ReducePlan p;
  ASSERT_TRUE(make_reduce_plan({64, 4096}, {4096, 1}, {false, true}, p));
  EXPECT_TRUE(p.warp);
  EXPECT_EQ(p.nout, 64);
  EXPECT_EQ(p.count, 4096);
  ASSERT_TRUE(make_reduce_plan({4096, 64}, {64, 1}, {true, false}, p));
  EXPECT_FALSE(p.warp);
  EXPECT_EQ(p.nkeep, 1);
  EXPECT_EQ(p.keep_stride[0], 1);
  EXPECT_EQ(p.red_stride[0], 64);
}

TEST(CudaReducePlan, DimsMergeAndSizeOneDimsVanish) {
  ReducePlan p;
  // (N, C, H, W) over N, H, W (batch norm's statistics): C kept; H and W merge, N stays apart.
  ASSERT_TRUE(
      make_reduce_plan({8, 16, 1, 5, 7}, {560, 35, 35, 7, 1}, {true, false, true, true, true}, p));
  EXPECT_EQ(p.nkeep, 1);
  EXPECT_EQ(p.keep_size[0], 16);
  ASSERT_EQ(p.nred, 2);
  EXPECT_EQ(p.red_size[0], 8);
  EXPECT_EQ(p.red_size[1], 35);
  EXPECT_EQ(p.red_stride[1], 1);
  EXPECT_EQ(p.count, 8 * 35);
  EXPECT_TRUE(p.warp);
  // Everything: one output, all dims merged.
  ASSERT_TRUE(make_reduce_plan({3, 4, 5}, {20, 5, 1}, {true, true, true}, p));
  EXPECT_EQ(p.nout, 1);
  EXPECT_EQ(p.nred, 1);
  EXPECT_EQ(p.red_size[0], 60);
}

TEST(CudaReducePlan, FewOutputsSplitTheReducedRange) {
  ReducePlan p;
  ASSERT_TRUE(make_reduce_plan({1 << 24}, {1}, {true}, p));
  choose_split(p, 132);
  EXPECT_EQ(p.split, 132 * 32);  // a warp per chunk on every SM
  EXPECT_GE(p.chunk * p.split, p.count);
  EXPECT_LT((p.split - 1) * p.chunk, p.count);
  // Many outputs: no split.
  ASSERT_TRUE(make_reduce_plan({1 << 16, 64}, {64, 1}, {false, true}, p));
  choose_split(p, 132);
  EXPECT_EQ(p.split, 1);
  EXPECT_EQ(p.chunk, 64);
  // Chunks never drop below the minimum, and none is empty.
  ASSERT_TRUE(make_reduce_plan({10000}, {1}, {true}, p));
  choose_split(p, 132);
  EXPECT_EQ(p.split, 5);
  EXPECT_EQ(p.chunk, 2000);
  ASSERT_TRUE(make_reduce_plan({4097}, {1}, {true}, p));
  choose_split(p, 132);
  EXPECT_LE((p.split - 1) * p.chunk, p.count - 1);
  EXPECT_GE(p.split * p.chunk, p.count);
}

// ---- matmul operands read in place (matmul_plan.h) ----------------------------------------------

// cuBLASLt's D = op(A) op(B) computed on the host from a plan, as its documentation defines it:
// column-major matrices (element (i, j) at i + j * ld, plus the batch index times its stride),
// op = transpose when the flag is set. A's memory is Spore's B, B's is Spore's A (matmul_plan.h).
std::vector<double> lt_product(const MatmulPlan& p, const double* a, int64_t sa, const double* b,
                               int64_t sb, int64_t batch) {
  auto at = [](const LtMatrix& m, const double* mem, int64_t i, int64_t j) {
    return m.transposed ? mem[j + i * m.ld] : mem[i + j * m.ld];
  };
  const int64_t rows = p.d.rows, cols = p.d.cols;
  const int64_t inner = p.a.transposed ? p.a.rows : p.a.cols;
  std::vector<double> d(size_t(batch * rows * cols));
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) {
        double s = 0;
        for (int64_t k = 0; k < inner; ++k)
          s += at(p.a, a + t * sa, i, k) * at(p.b, b + t * sb, k, j);
        d[size_t(t * rows * cols + i + j * p.d.ld)] = s;
      }
  return d;
}

// Each case: operands as views (transposed, padded rows, a column or row slice, batches, an
// expanded batch); the plan read in place must give the product of their contiguous copies
// bit for bit (float64, the same sums in the same order).
TEST(MatmulPlan, ViewsReadInPlaceGiveTheProduct) {
  using spore::Tensor;
  spore::set_seed(4);
  struct Case {
    const char* what;
    Tensor a, b;
    bool a_by_columns, b_by_columns;
  };
  auto r = [](spore::Shape s) { return spore::randn(s, spore::kFloat64); };
  const Case cases[] = {
      {"both contiguous", r({5, 7}), r({7, 4}), false, false},
      {"b a transposed weight (Dense)", r({5, 7}), r({4, 7}).t(), false, true},
      {"a transposed (a weight gradient's dy^T)", r({7, 5}).t(), r({7, 4}), true, false},
      {"both transposed", r({7, 5}).t(), r({4, 7}).t(), true, true},
      {"a with padded rows (a column slice)", r({5, 10}).slice(1, 2, 9), r({7, 4}), false, false},
      {"b transposed with padded columns", r({5, 7}), r({4, 12}).slice(1, 3, 10).t(), false, true},
      {"a a column slice (K = 1)", r({4, 6}).slice(1, 2, 3), r({1, 3}), false, false},
      {"b a strided row (K = 1)", r({4, 1}), r({3, 3}).slice(1, 0, 1).t(), false, true},
      {"batched, a transposed", r({2, 5, 4}).transpose(-1, -2), r({2, 5, 3}), true, false},
      {"batched, b an expanded weight", r({3, 4, 5}), r({5, 6}).expand({3, 5, 6}), false, false},
      {"batched with size-1 dims", r({2, 1, 3, 4, 5}), r({2, 1, 3, 5, 2}), false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const MatmulOperand oa = matmul_operand(c.a.shape(), c.a.strides()),
                        ob = matmul_operand(c.b.shape(), c.b.strides());
    ASSERT_TRUE(oa.usable && ob.usable);
    EXPECT_EQ(oa.by_columns, c.a_by_columns);
    EXPECT_EQ(ob.by_columns, c.b_by_columns);
    const Tensor want = spore::matmul(c.a.contiguous(), c.b.contiguous()).contiguous();
    const int64_t M = c.a.size(-2), K = c.a.size(-1), N = c.b.size(-1);
    const int64_t batch = want.numel() / (M * N);
    ASSERT_TRUE(oa.batches == batch || oa.batches == 1);
    ASSERT_TRUE(ob.batches == batch || ob.batches == 1);
    const std::vector<double> d = lt_product(
        matmul_plan(oa, ob, M, N, K), static_cast<const double*>(c.b.data_ptr()),
        ob.batches == 1 ? 0 : ob.batch_stride, static_cast<const double*>(c.a.data_ptr()),
        oa.batches == 1 ? 0 : oa.batch_stride, batch);
    // D is C^T in column-major order: C's row-major bytes.
    EXPECT_EQ(d, want.to_vector<double>());
  }
}

// Layouts cuBLASLt cannot read in place: the kernel copies them to contiguous tensors first.
TEST(MatmulPlan, OtherLayoutsAreCopiedFirst) {
  spore::set_seed(5);
  const spore::Tensor permuted = spore::randn({3, 2, 4, 5}, spore::kFloat64).transpose(0, 1),
                      both_strided =
                          spore::randn({6, 8}, spore::kFloat64).slice(0, 0, 6, 2).slice(1, 0, 8, 2),
                      expanded_rows = spore::randn({1, 5}, spore::kFloat64).expand({4, 5});
  for (const spore::Tensor& t : {permuted, both_strided, expanded_rows})
    EXPECT_FALSE(matmul_operand(t.shape(), t.strides()).usable)
        << spore::shape_str(t.shape()) << " strides " << spore::shape_str(t.strides());
}

}  // namespace
