// Graph mode's captured step on a GPU (a CUDA graph; docs/graph.md, "Capture"): the same program as
// the test device's capture tests (tests/devices/capture_run.h), which check the executor's logic
// without a GPU. Skipped with the reason where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/backend.h"
#include "cuda/gpu_visible.h"
#include "devices/capture_run.h"

namespace {
using namespace spore;
using test_support::train_captured;

class GpuCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test_support::gpu_visible(&why)) GTEST_SKIP() << why;
  }
  const Device gpu{DeviceType::GPU, 0};
};

// Largest difference over the largest magnitude (cuDNN's weight-gradient algorithms may add in
// another order from run to run, so the comparison is to float32 rounding, not bitwise).
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return a.size() == b.size() ? err / scale : 1e30;
}

TEST_F(GpuCapture, LeNetGraphStepAsACudaGraphEqualsPlainRuns) {
  const auto plain = train_captured(gpu, false, false, 6);
  const auto captured = train_captured(gpu, true, false, 6);
  EXPECT_EQ(plain.replays, 0);
  EXPECT_EQ(captured.replays, 5) << "run 1 plain, run 2 recorded and replayed, then replays";
  EXPECT_LE(rel_diff(captured.losses, plain.losses), 1e-5);
  ASSERT_EQ(captured.params.size(), plain.params.size());
  for (size_t i = 0; i < plain.params.size(); ++i)
    EXPECT_LE(rel_diff(captured.params[i], plain.params[i]), 1e-5) << "parameter " << i;
}

TEST_F(GpuCapture, StepsWithDropoutRunKernelByKernel) {
  const auto captured = train_captured(gpu, true, true, 4);
  EXPECT_EQ(captured.replays, 0);
  for (float l : captured.losses) EXPECT_TRUE(std::isfinite(l));
}

}  // namespace
