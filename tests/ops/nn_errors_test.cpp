// User errors of the nn primitives (the message names the op, what was expected and what was
// given), SPORE_DNNL_CHECK's report, and reuse of cached oneDNN primitives.
#include <gtest/gtest.h>

#include "backends/cpu/onednn/onednn.h"
#include "ops/op.h"
#include "spore/spore.h"
#include "test_util.h"

namespace spore {
namespace {

// The message of the spore::Error thrown by f (fails the test when nothing is thrown).
using ::spore::test::error_of;

TEST(NnErrors, MatmulInnerDims) {
  EXPECT_EQ(error_of([] {
              matmul(zeros({32, 100}), zeros({50, 10}));
            }),
            "[matmul] inner dimensions differ: (32, 100) @ (50, 10)");
  EXPECT_NE(error_of([] {
              matmul(zeros({2, 3, 4}), zeros({2, 5, 6}));
            }).find("(2, 3, 4) @ (2, 5, 6)"),
            std::string::npos);
  EXPECT_NE(error_of([] { matmul(zeros({3}), zeros({4})); }).find("inner dimensions differ"),
            std::string::npos);
}

TEST(NnErrors, MatmulBatchBroadcast) {
  const std::string m = error_of([] { matmul(zeros({2, 3, 4}), zeros({5, 4, 6})); });
  EXPECT_NE(m.find("[matmul]"), std::string::npos) << m;
  EXPECT_NE(m.find("cannot be broadcast"), std::string::npos) << m;
}

TEST(NnErrors, ConvChannelMismatch) {
  const std::string m = error_of([] { conv2d(zeros({1, 3, 8, 8}), zeros({6, 4, 3, 3})); });
  EXPECT_NE(m.find("[conv2d]"), std::string::npos) << m;
  EXPECT_NE(m.find("C=3"), std::string::npos) << m;
  EXPECT_NE(m.find("(6, 4, 3, 3)"), std::string::npos) << m;
}

TEST(NnErrors, ConvBadGroups) {
  const std::string m = error_of([] {
    conv2d(zeros({1, 4, 8, 8}), zeros({6, 2, 3, 3}), {.groups = 3});
  });
  EXPECT_NE(m.find("groups=3"), std::string::npos) << m;
  EXPECT_NE(m.find("C=4"), std::string::npos) << m;
}

TEST(NnErrors, ConvKernelTooLarge) {
  const std::string m = error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 5, 5})); });
  EXPECT_NE(m.find("larger than the padded input"), std::string::npos) << m;
}

TEST(NnErrors, ConvRank) {
  const std::string m = error_of([] { conv2d(zeros({3, 8, 8}), zeros({6, 3, 3, 3})); });
  EXPECT_NE(m.find("rank 4 (N, C, H, W)"), std::string::npos) << m;
}

TEST(NnErrors, PoolKernelLargerThanPaddedInput) {
  const std::string m = error_of([] {
    max_pool2d(zeros({1, 1, 3, 3}), Pool2dOptions{.kernel_size = {5, 5}});
  });
  EXPECT_NE(m.find("[max_pool2d] pool kernel (5, 5) is larger than the padded input (3, 3)"),
            std::string::npos)
      << m;
  const std::string a = error_of([] {
    avg_pool2d(zeros({1, 1, 3, 3}), Pool2dOptions{.kernel_size = {2, 2}, .padding = {2, 2}});
  });
  EXPECT_NE(a.find("at most half the kernel size"), std::string::npos) << a;
}

TEST(NnErrors, NormShapes) {
  EXPECT_NE(error_of([] {
              batch_norm_train(zeros({4, 3, 2, 2}), ones({4}), zeros({3}), 1e-5);
            }).find("gamma must have shape (3)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              layer_norm(zeros({4, 6}), ones({5}), zeros({5}), 1);
            }).find("normalized shape (6,)"),
            std::string::npos);
}

TEST(NnErrors, OptimizerUpdateShapes) {
  const std::string m = error_of([] {
    ops::call(ops::OpId::ApplyMomentum, {zeros({3}), zeros({3}), zeros({4})},
              ops::Attrs().set("lr", 0.1).set("momentum", 0.9));
  });
  EXPECT_NE(m.find("[apply_momentum] grad (input 2) has shape (4,) but param has shape (3,)"),
            std::string::npos)
      << m;
}

// Stands in for a oneDNN call that fails (the test binary does not link oneDNN itself).
int failing_dnnl_call() {
  throw dnnl::error(dnnl_unimplemented, "could not create a primitive descriptor");
}

TEST(Onednn, CheckMacroReport) {
  const std::string m =
      error_of([] { (void)SPORE_DNNL_CHECK(failing_dnnl_call(), "try float32"); });
  EXPECT_NE(m.find("oneDNN call failed: failing_dnnl_call()"), std::string::npos) << m;
  EXPECT_NE(m.find("status: unimplemented"), std::string::npos) << m;
  EXPECT_NE(m.find("nn_errors_test.cpp:"), std::string::npos) << m;
  EXPECT_NE(m.find("hint: try float32"), std::string::npos) << m;
  const std::string s =
      error_of([] { SPORE_DNNL_CHECK_STATUS(dnnl_invalid_arguments, "check lda"); });
  EXPECT_NE(s.find("status: invalid_arguments"), std::string::npos) << s;
  EXPECT_NE(s.find("hint: check lda"), std::string::npos) << s;
}

TEST(Onednn, PrimitivesAreCached) {
  Tensor x = randn({2, 3, 9, 9}), w = randn({4, 3, 3, 3}), a = randn({17, 19}), b = randn({19, 5});
  conv2d(x, w);
  matmul(a, b);
  const size_t n = cpu::onednn::cache_size();
  for (int i = 0; i < 3; ++i) {
    conv2d(x, w);
    matmul(a, b);
  }
  EXPECT_EQ(cpu::onednn::cache_size(), n);
}

}  // namespace
}  // namespace spore
