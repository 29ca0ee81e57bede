// The CUDA emulator's own tests (test_cuda_emu): that it runs CUDA as a GPU does where the
// backend's kernels depend on it (barriers, shared memory, shuffles, stream order, capture), and
// that it reports what a GPU punishes (barrier divergence, reading a copy before waiting for it,
// synchronising inside a capture). Compiled like the backend's kernel files: launches rewritten,
// emu_kernel.h first.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace spore::emu {
void reset_after_fault();  // runtime.cpp: clears the sticky error (tests only)
}

namespace {

// Block sums through shared memory and __syncthreads (a tree), one partial per block.
__global__ void block_sum(const float* x, int n, float* partial) {
  __shared__ float s[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// Each lane's result of the four shuffles over a warp of lane ids.
__global__ void shuffles(int* out) {
  const int lane = threadIdx.x % 32;
  out[threadIdx.x * 4 + 0] = __shfl_down_sync(0xffffffffu, lane, 3);
  out[threadIdx.x * 4 + 1] = __shfl_up_sync(0xffffffffu, lane, 2);
  out[threadIdx.x * 4 + 2] = __shfl_xor_sync(0xffffffffu, lane, 5);
  out[threadIdx.x * 4 + 3] = __shfl_sync(0xffffffffu, lane, 7, 16);
}

__global__ void vote(const int* flags, int* any) {
  const int r = __syncthreads_or(flags[threadIdx.x]);
  if (threadIdx.x == 0) *any = r;
}

// A barrier only the even threads reach: a GPU hangs or misbehaves; the emulator names it.
__global__ void divergent(int* x) {
  if (threadIdx.x % 2 == 0) __syncthreads();
  x[threadIdx.x] = 1;
}

__global__ void add_one(int* x) { x[threadIdx.x] += 1; }

class Emulator : public ::testing::Test {
 protected:
  void TearDown() override { spore::emu::reset_after_fault(); }
};

TEST_F(Emulator, BarriersAndSharedMemoryGiveBlockSums) {
  const int n = 1000, blocks = 4;
  std::vector<float> h(n);
  for (int i = 0; i < n; ++i) h[size_t(i)] = float(i % 7);
  float *x = nullptr, *p = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), blocks * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, nullptr),
            cudaSuccess);
  block_sum<<<blocks, 256, 0, nullptr>>>(x, n, p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> got(blocks);
  ASSERT_EQ(cudaMemcpyAsync(got.data(), p, blocks * sizeof(float), cudaMemcpyDeviceToHost, nullptr),
            cudaSuccess);  // to pageable memory: returns when done
  for (int b = 0; b < blocks; ++b) {
    float want = 0;
    for (int i = b * 256; i < std::min(n, (b + 1) * 256); ++i) want += h[size_t(i)];
    EXPECT_EQ(got[size_t(b)], want) << "block " << b;
  }
  cudaFree(x);
  cudaFree(p);
}

TEST_F(Emulator, ShufflesFollowCudasLaneRules) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64 * 4 * sizeof(int)), cudaSuccess);
  shuffles<<<1, 64, 0, nullptr>>>(d);
  std::vector<int> got(64 * 4);
  ASSERT_EQ(
      cudaMemcpyAsync(got.data(), d, got.size() * sizeof(int), cudaMemcpyDeviceToHost, nullptr),
      cudaSuccess);
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(got[size_t(t * 4 + 0)], lane + 3 < 32 ? lane + 3 : lane) << t;
    EXPECT_EQ(got[size_t(t * 4 + 1)], lane >= 2 ? lane - 2 : lane) << t;
    EXPECT_EQ(got[size_t(t * 4 + 2)], lane ^ 5) << t;
    EXPECT_EQ(got[size_t(t * 4 + 3)], lane / 16 * 16 + 7) << t;
  }
  cudaFree(d);
}

TEST_F(Emulator, SyncthreadsOrVotesAcrossTheBlock) {
  int *flags = nullptr, *any = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&flags), 128 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&any), sizeof(int)), cudaSuccess);
  for (int which : {-1, 100}) {
    std::vector<int> h(128, 0);
    if (which >= 0) h[size_t(which)] = 1;
    cudaMemcpyAsync(flags, h.data(), 128 * sizeof(int), cudaMemcpyHostToDevice, nullptr);
    vote<<<1, 128, 0, nullptr>>>(flags, any);
    int got = -1;
    cudaMemcpyAsync(&got, any, sizeof(int), cudaMemcpyDeviceToHost, nullptr);
    EXPECT_EQ(got, which >= 0 ? 1 : 0);
  }
  cudaFree(flags);
  cudaFree(any);
}

TEST_F(Emulator, DivergentBarrierIsALaunchFailure) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(int)), cudaSuccess);
  divergent<<<1, 64, 0, nullptr>>>(d);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the launch itself is fine ...
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);  // ... running it is not
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("divergent"), std::string::npos) << log;
  EXPECT_NE(log.find("disagree on barriers"), std::string::npos) << log;
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // sticky, as on a GPU
}

TEST_F(Emulator, WorkRunsWhenTheHostWaitsNotBefore) {
  int* d = nullptr;
  int* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 32 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 32 * sizeof(int), 0), cudaSuccess);
  std::memset(pinned, 0, 32 * sizeof(int));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  cudaMemsetAsync(d, 0, 32 * sizeof(int), s);
  add_one<<<1, 32, 0, s>>>(d);
  cudaMemcpyAsync(pinned, d, 32 * sizeof(int), cudaMemcpyDeviceToHost, s);
  cudaEventRecord(done, s);
  EXPECT_EQ(pinned[0], 0) << "read before waiting: the copy has not run yet";
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);  // the first ask
  EXPECT_EQ(cudaEventSynchronize(done), cudaSuccess);
  EXPECT_EQ(pinned[0], 1);
  EXPECT_EQ(pinned[31], 1);
  cudaEventDestroy(done);
  cudaStreamDestroy(s);
  cudaFreeHost(pinned);
  cudaFree(d);
}

TEST_F(Emulator, FreshDeviceMemoryIsNotZero) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 4 * sizeof(float)), cudaSuccess);
  float h[4] = {};
  cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, nullptr);
  EXPECT_TRUE(h[0] != h[0]) << "uninitialised device floats read as NaN";
  cudaFree(d);
}

TEST_F(Emulator, CopiesStayInsideTheirAllocation) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 8 * sizeof(int)), cudaSuccess);
  std::vector<int> h(16, 0);
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaMemcpyAsync(d, h.data(), 16 * sizeof(int), cudaMemcpyHostToDevice, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(d + 4, 0, 8 * sizeof(int), nullptr), cudaErrorInvalidValue);
  testing::internal::GetCapturedStderr();
  cudaGetLastError();
  cudaFree(d);
}

// With SPORE_CUDA_EMU_PROTECT=1 the host cannot touch GPU memory between synchronisations: the
// fault names the allocation (a fresh process: the switch is read once).
TEST(EmulatorDeathTest, HostAccessToGpuMemoryFaultsAndIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        setenv("SPORE_CUDA_EMU_PROTECT", "1", 1);
        int* d = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(int));
        add_one<<<1, 32, 0, nullptr>>>(d);
        cudaDeviceSynchronize();             // kernels and copies may touch it ...
        std::fprintf(stderr, "%d\n", d[3]);  // ... the host may not
      },
      "the host touched GPU memory at .*an allocation of 256 bytes");
}

TEST_F(Emulator, CaptureRecordsReplaysAndRefusesSynchronisation) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 32 * sizeof(int)), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaMemsetAsync(d, 0, 32 * sizeof(int), s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  add_one<<<1, 32, 0, s>>>(d);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  int h = -1;
  cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s);
  EXPECT_EQ(h, 0) << "captured work is recorded, not run";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphLaunch(exec, s);
  cudaGraphLaunch(exec, s);
  cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s);
  EXPECT_EQ(h, 2) << "each replay runs the recorded kernel";

  // A synchronisation inside a capture is refused and invalidates it, as CUDA does.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  testing::internal::CaptureStderr();
  cudaGraph_t bad = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &bad), cudaErrorStreamCaptureInvalidated);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(bad, nullptr);
  // So is a copy from pageable memory.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(d, &h, sizeof h, cudaMemcpyHostToDevice, s),
            cudaErrorStreamCaptureUnsupported);
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaStreamEndCapture(s, &bad), cudaErrorStreamCaptureInvalidated);
  testing::internal::GetCapturedStderr();
  cudaGetLastError();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(d);
}

}  // namespace
