// The parity suite: every op-table row (tests/ops/op_table.h) whose primitive has a GPU kernel, in
// each of its dtypes plus float16 / bfloat16 where the CPU runs the row in them, on the GPU against
// the CPU on the same inputs. Every GPU block is poisoned (0xFF bytes: NaN in every float type)
// when it is handed out (SPORE_CUDA_POISON=1, set before the backend starts), so an element a
// kernel forgets to write shows. Tolerances per dtype from op_table.cpp. One test walks the table
// and lists every mismatch; rows that reach a primitive without a GPU kernel yet, or without one
// for that dtype, are counted apart (cuda_backend_test.cpp's coverage list says which).
// SPORE_PARITY_FILTER=substring runs the rows whose name contains it. Skipped with the reason where
// no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/test_device/test_device.h"
#include "cuda/gpu_visible.h"
#include "ops/op_table.h"

namespace spore::test {
namespace {

// Before any GPU allocation: the allocator reads it when the device first starts.
[[maybe_unused]] const bool kPoison = setenv("SPORE_CUDA_POISON", "1", 0) == 0;

const Device kGpu{DeviceType::GPU, 0};

// Moves an input keeping its strides (a transposed input stays transposed on the device).
Tensor moved_to(const Tensor& t, Device dev) {
  if (t.is_contiguous() || t.dim() < 2) return t.to(dev);
  return t.transpose(-2, -1).contiguous().to(dev).transpose(-2, -1);
}

using test_support::gpu_visible;

// "" when equal within the dtype's tolerance, else what differs.
std::string compare(const Tensor& got, const Tensor& want, DType dt) {
  if (got.shape() != want.shape())
    return "shape " + shape_str(got.shape()) + " vs " + shape_str(want.shape());
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + dtype_name(got.dtype()) + " vs " + dtype_name(want.dtype());
  const std::vector<double> g = values(got.cpu().contiguous()), w = values(want.contiguous());
  const Tolerance tol = tolerance(is_floating(want.dtype()) ? dt : kInt64);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (std::isinf(w[i]) && g[i] == w[i]) continue;
    if (!(std::fabs(g[i] - w[i]) <= tol.atol + tol.rtol * std::fabs(w[i])))
      return "element " + std::to_string(i) + ": GPU " + std::to_string(g[i]) + ", CPU " +
             std::to_string(w[i]);
  }
  return "";
}

struct Report {
  int compared = 0, no_kernel_rows = 0;
  std::vector<std::string> failures, uses_missing;
};

// Runs the rows whose name contains `filter` on `dev` against the CPU.
Report parity(Device dev, const std::string& filter) {
  Report r;
  for (const OpCase& c : op_cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    const ops::OpDef& def = ops::op_def(c.op);
    if (!def.has(ops::kView) && !ops::find_kernel(c.op, dev.type)) {
      ++r.no_kernel_rows;
      continue;
    }
    std::vector<DType> dtypes = c.dtypes;
    if (std::find(dtypes.begin(), dtypes.end(), kFloat32) != dtypes.end())
      for (DType h : {kFloat16, kBFloat16})
        if (std::find(dtypes.begin(), dtypes.end(), h) == dtypes.end()) dtypes.push_back(h);
    for (DType dt : dtypes) {
      const std::string what = c.name + " [" + dtype_name(dt) + "]";
      Tensors in, want;
      try {
        in = make_inputs(c, dt);
        set_seed(1234);
        want = c.run(in);
      } catch (const Error&) {
        continue;  // the CPU does not run this row in this dtype: nothing to compare with
      }
      Tensors din, got;
      try {
        for (const Tensor& t : in) din.push_back(t.defined() ? moved_to(t, dev) : t);
        const DeviceGuard on_dev(dev);
        set_seed(1234);
        got = c.run(din);
        get_backend(dev.type).synchronize(dev.index);
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find("has no kernel for device") != std::string::npos ||
            msg.find("does not support dtype") != std::string::npos)
          r.uses_missing.push_back(what + ": " + msg);
        else
          r.failures.push_back(what + ": threw " + msg);
        continue;
      }
      ++r.compared;
      if (got.size() != want.size()) {
        r.failures.push_back(what + ": " + std::to_string(got.size()) + " outputs, CPU " +
                             std::to_string(want.size()));
        continue;
      }
      for (size_t k = 0; k < got.size(); ++k) {
        if (!want[k].defined()) continue;
        if (got[k].device() != dev) {
          r.failures.push_back(what + " output " + std::to_string(k) + " left the device");
          continue;
        }
        const std::string diff = compare(got[k], want[k], dt);
        if (!diff.empty())
          r.failures.push_back(what + " output " + std::to_string(k) + ": " + diff);
      }
    }
  }
  return r;
}

TEST(GpuOpParity, EveryRowWithAGpuKernelEqualsTheCpu) {
  std::string why;
  if (!gpu_visible(&why)) GTEST_SKIP() << why;
  const char* filter = std::getenv("SPORE_PARITY_FILTER");
  const Report r = parity(kGpu, filter ? filter : "");
  std::printf(
      "GPU parity: %d row x dtype runs compared, %zu mismatched; %d rows have no GPU kernel yet, "
      "%zu runs "
      "reach a primitive without one\n",
      r.compared, r.failures.size(), r.no_kernel_rows, r.uses_missing.size());
  for (const std::string& m : r.uses_missing) std::printf("  needs a kernel: %s\n", m.c_str());
  EXPECT_TRUE(r.failures.empty()) << ::testing::PrintToString(r.failures);
  EXPECT_GT(r.compared, 0);
}

// The harness itself, without a GPU: on the test device (the CPU's kernels on memory of its own)
// every row it runs must equal the CPU.
TEST(GpuOpParity, TheHarnessPassesOnTheTestDevice) {
  enable_test_device();
  get_backend(DeviceType::Test);  // registers its kernels
  const Report r = parity(Device{DeviceType::Test, 0}, "");
  EXPECT_TRUE(r.failures.empty()) << ::testing::PrintToString(r.failures);
  EXPECT_GT(r.compared, 100);
  EXPECT_TRUE(r.uses_missing.empty()) << ::testing::PrintToString(r.uses_missing);
}

}  // namespace
}  // namespace spore::test
