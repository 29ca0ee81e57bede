// Launch-shape arithmetic of the CUDA kernels (src/backends/cuda/launch.h), without a GPU: grid
// sizes, and the merging of operand dims into the fewest an elementwise kernel indexes.
#include <gtest/gtest.h>

#include "backends/cuda/launch.h"
#include "backends/cuda/reduce_plan.h"

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

}  // namespace
