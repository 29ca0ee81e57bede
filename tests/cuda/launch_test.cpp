// Launch-shape arithmetic of the CUDA kernels (src/backends/cuda/launch.h), without a GPU: grid
// sizes, and the merging of operand dims into the fewest an elementwise kernel indexes.
#include <gtest/gtest.h>

#include "backends/cuda/launch.h"

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

}  // namespace
