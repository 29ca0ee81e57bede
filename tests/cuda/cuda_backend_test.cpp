// The CUDA backend from the outside: which ops have a GPU kernel (every ops.def primitive is either
// covered or listed here as not yet, so the coverage is visible and shrinks), the messages without
// a GPU, and, where a GPU is visible, the first kernels against the CPU kernel on the same inputs
// per dtype (float32 to 1e-5, float16/bfloat16 to their precision; op_parity_test.cpp walks the
// whole op table). Without a GPU the parity tests are skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "backends/backend.h"
#include "ops/op.h"
#include "spore/ops.h"
#include "spore/spore.h"

namespace {
using namespace spore;

bool cuda_built() { return has_backend(DeviceType::GPU); }
int gpu_count() { return cuda_built() ? get_backend(DeviceType::GPU).device_count() : 0; }

// Primitives without a GPU kernel (a new primitive lands here until it gets one: the list must stay
// true both ways). The CPU backend's private ops are not in ops.def: the GPU never sees them.
const std::set<std::string> kNotYet = {"slice", "expand", "permute",
                                       "reshape"};  // views: no kernel on any device

TEST(CudaBackend, EveryPrimitiveHasAGpuKernelOrIsListed) {
  if (!cuda_built())
    GTEST_SKIP() << "this build has no CUDA backend: " << detail::cuda_plugin_status();
  std::vector<std::string> missing, stale;
  int covered = 0;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const ops::OpDef& d = ops::op_def(ops::OpId(i));
    const bool has = ops::find_kernel(d.id, DeviceType::GPU) != nullptr;
    const bool listed = kNotYet.count(d.name) > 0;
    if (has) ++covered;
    if (!has && !listed && !d.has(ops::kView)) missing.push_back(d.name);
    if (has && listed) stale.push_back(d.name);
  }
  EXPECT_TRUE(missing.empty()) << "no GPU kernel and not listed: "
                               << ::testing::PrintToString(missing);
  EXPECT_TRUE(stale.empty()) << "has a GPU kernel now: take it off the list: "
                             << ::testing::PrintToString(stale);
  std::printf("GPU kernels: %d of %d primitives (%zu not yet)\n", covered, ops::kNumOps,
              kNotYet.size());
}

TEST(CudaBackend, NoGpuIsAClearMessageDifferentFromNoCudaBuild) {
  if (gpu_count() > 0) GTEST_SKIP() << "a GPU is visible";
  std::string msg;
  try {
    set_device("GPU");
  } catch (const Error& e) {
    msg = e.what();
  }
  if (cuda_built()) {
    EXPECT_NE(msg.find("this build has the GPU backend, but no GPU is visible"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("nvidia-smi"), std::string::npos) << msg;
  } else {
    EXPECT_NE(msg.find("no CUDA backend"), std::string::npos) << msg;
  }
  set_device("CPU");
}

// ---- parity (needs a GPU) ----------------------------------------------------------------------

Tensor random_on_cpu(Shape s, DType dt, uint64_t seed, double lo = -2, double hi = 2) {
  set_seed(seed);
  return (rand(s, kFloat32, Device{}) * (hi - lo) + lo).to(dt);
}

double tolerance(DType dt) { return dt == kFloat32 ? 1e-5 : dt == kFloat16 ? 2e-3 : 1.6e-2; }

void expect_close(const Tensor& gpu, const Tensor& cpu, DType dt, const std::string& what) {
  const std::vector<float> g = gpu.cpu().to(kFloat32).to_vector<float>(),
                           c = cpu.to(kFloat32).to_vector<float>();
  ASSERT_EQ(g.size(), c.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = tolerance(dt) * std::max(1.0, std::fabs(double(c[i])));
    if (std::isnan(c[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]";
      continue;
    }
    ASSERT_NEAR(g[i], c[i], tol) << what << " [" << i << "] " << dtype_name(dt);
  }
}

class GpuParity : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0)
      GTEST_SKIP() << (cuda_built() ? get_backend(DeviceType::GPU).unavailable_reason()
                                    : detail::cuda_plugin_status());
  }
  Device gpu{DeviceType::GPU, 0};
};

TEST_P(GpuParity, UnaryBinaryCastReduceSoftmaxMatmul) {
  const DType dt = GetParam();
  const Tensor x = random_on_cpu({3, 4, 5}, dt, 1), y = random_on_cpu({4, 1}, dt, 2);
  const Tensor xg = x.to(gpu), yg = y.to(gpu);
  expect_close(exp(xg), exp(x), dt, "exp");
  expect_close(tanh(xg), tanh(x), dt, "tanh");
  expect_close(relu(xg), relu(x), dt, "relu");
  expect_close(gelu(xg), gelu(x), dt, "gelu");
  expect_close(gelu(xg, true), gelu(x, true), dt, "gelu tanh");
  expect_close(leaky_relu(xg, 0.1), leaky_relu(x, 0.1), dt, "leaky_relu");
  expect_close(xg + yg, x + y, dt, "add broadcast");
  expect_close(xg * yg, x * y, dt, "mul broadcast");
  expect_close(xg.transpose(0, 2) - 1.5, x.transpose(0, 2) - 1.5, dt, "sub strided + host scalar");
  expect_close(maximum(xg, yg), maximum(x, y), dt, "maximum");
  expect_close(less(xg, yg).to(kFloat32), less(x, y).to(kFloat32), kFloat32, "less");
  expect_close(xg.to(kFloat32), x.to(kFloat32), dt, "cast");
  expect_close(xg.transpose(0, 1).contiguous(), x.transpose(0, 1).contiguous(), dt, "copy strided");
  expect_close(sum(xg, {1}), sum(x, {1}), dt, "sum axis 1");
  expect_close(mean(xg, {0, 2}, true), mean(x, {0, 2}, true), dt, "mean axes 0, 2");
  expect_close(softmax(xg, 1), softmax(x, 1), dt, "softmax axis 1");
  expect_close(log_softmax(xg, -1), log_softmax(x, -1), dt, "log_softmax");
  const Tensor a = random_on_cpu({2, 3, 8}, dt, 3), b = random_on_cpu({8, 5}, dt, 4);
  expect_close(matmul(a.to(gpu), b.to(gpu)), matmul(a, b), dt, "matmul batched x 2-d");
  const Tensor c = random_on_cpu({2, 1, 3, 8}, dt, 5), d = random_on_cpu({1, 4, 8, 5}, dt, 6);
  expect_close(matmul(c.to(gpu), d.to(gpu)), matmul(c, d), dt, "matmul broadcast batch");
}

// The paths small op-table rows never take: grid-stride loops past the launch cap (more elements
// than 132 x 32 blocks of 256 threads), the vector path's tail and a misaligned view, reductions
// split over chunks and merged, warp- and thread-per-output layouts, long softmax / arg / cumsum
// rows, sorts past the bitonic kernel's 1024, large transposes and pools.
TEST_P(GpuParity, LargeShapesTakeTheGridStrideSplitAndLongRowPaths) {
  const DType dt = GetParam();
  if (dt != kFloat32) GTEST_SKIP() << "float32 covers the layouts; the dtypes are the rows' job";
  auto close = [&](const Tensor& g, const Tensor& c, double rel, const std::string& what) {
    const std::vector<float> gv = g.cpu().to(kFloat32).to_vector<float>(),
                             cv = c.to(kFloat32).to_vector<float>();
    ASSERT_EQ(gv.size(), cv.size()) << what;
    for (size_t i = 0; i < gv.size(); ++i)
      ASSERT_NEAR(gv[i], cv[i], rel * std::max(1.0, std::fabs(double(cv[i]))))
          << what << " [" << i << "]";
  };
  const int64_t n = 3'000'001;  // odd: a vector tail
  const Tensor x = random_on_cpu({n}, dt, 11, 0, 1), y = random_on_cpu({n}, dt, 12, 0, 1);
  const Tensor xg = x.to(gpu), yg = y.to(gpu);
  close(exp(xg), exp(x), 1e-6, "exp, 3M");
  close(xg + yg, x + y, 1e-6, "add, 3M");
  close(xg.slice(0, 1, n) * 2.0, x.slice(0, 1, n) * 2.0, 1e-6, "misaligned view");
  close(sum(xg), sum(x), 1e-5, "sum of 3M (split and merged)");
  const Tensor m = random_on_cpu({3000, 1000}, dt, 13, 0, 1), mg = m.to(gpu);
  close(sum(mg, {0}), sum(m, {0}), 1e-5, "sum over rows (thread per output)");
  close(sum(mg, {1}), sum(m, {1}), 1e-5, "sum over columns (warp per output)");
  close(mg.transpose(0, 1).contiguous(), m.transpose(0, 1).contiguous(), 0,
        "transpose 3000 x 1000");
  const Tensor r = random_on_cpu({3, 100'000}, dt, 14), rg = r.to(gpu);
  EXPECT_EQ(argmax(rg, 1).cpu().to_vector<int64_t>(), argmax(r, 1).to_vector<int64_t>());
  close(softmax(rg, 1), softmax(r, 1), 1e-5, "softmax, rows of 100k");
  close(cumsum(rg, 1), cumsum(r, 1), 1e-4, "cumsum, rows of 100k");
  const Tensor u = random_on_cpu({4, 3000}, dt, 15), ug = u.to(gpu);
  const auto [sv, si] = sort(ug, 1);
  const auto [cv, ci] = sort(u, 1);
  close(sv, cv, 0, "sort values, rows of 3000");
  EXPECT_EQ(si.cpu().to_vector<int64_t>(), ci.to_vector<int64_t>());
  const auto [tv, ti] = topk(ug, 7, 1);
  const auto [kv, ki] = topk(u, 7, 1);
  close(tv, kv, 0, "topk 7 of 3000");
  EXPECT_EQ(ti.cpu().to_vector<int64_t>(), ki.to_vector<int64_t>());
  const Tensor img = random_on_cpu({2, 16, 128, 128}, dt, 16), ig = img.to(gpu);
  close(max_pool2d(ig, 2), max_pool2d(img, 2), 0, "max_pool2d 2 x 16 x 128 x 128");
}

// An index out of range is an IndexError on the GPU as on the CPU: the kernel reports it, the next
// synchronisation throws it naming the op, the value and the bound; the report is cleared, so the
// next op runs as usual.
TEST_P(GpuParity, OutOfRangeIndicesAreIndexErrorsAtTheNextSynchronisation) {
  const DType dt = GetParam();
  if (dt != kFloat32) GTEST_SKIP() << "the check is the kernels' index path, dtype-independent";
  const Tensor x = random_on_cpu({3, 5}, dt, 21).to(gpu);
  auto expect_error = [&](const std::function<Tensor()>& f, const std::string& want) {
    try {
      const Tensor r = f().cpu();
      ADD_FAILURE() << "no error; expected one naming " << want;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::IndexError) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    // Cleared: a valid op afterwards runs and synchronises without an error.
    EXPECT_NO_THROW((void)(x + 1.0).cpu());
  };
  const Tensor idx = from_vector<int64_t>({0, 7, 1}, {1, 3}, Device{}).to(gpu);
  expect_error([&] { return gather(x, 1, idx); },
               "[gather] index 7 is out of range for an axis of size 5");
  const Tensor neg = from_vector<int64_t>({-6}, {1}, Device{}).to(gpu);
  expect_error([&] { return index_select(x, 1, neg); }, "[index_select] index -6 is out of range");
  expect_error([&] { return scatter_add(x, 1, idx, x.slice(1, 0, 3)); },
               "[scatter_add] index 7 is out of range for an axis of size 5");
  const Tensor cls = from_vector<int64_t>({2, 3}, {2}, Device{}).to(gpu);
  expect_error([&] { return one_hot(cls, 3); }, "[one_hot] index 3 is out of range for depth 3");
  const Tensor labels = from_vector<int32_t>({1, 5, 0}, {3}, Device{}).to(gpu);
  expect_error(
      [&] {
        return ops::call(ops::OpId::SoftmaxCrossEntropyFused, {x, labels})[0];
      },
      "label 5 is out of range for 5 classes");
  // In range, negative index_select counts from the end as on the CPU.
  const Tensor last = from_vector<int64_t>({-1}, {1}, Device{});
  EXPECT_EQ(index_select(x, 1, last.to(gpu)).cpu().to_vector<float>(),
            index_select(x.cpu(), 1, last).to_vector<float>());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuParity, ::testing::Values(kFloat32, kFloat16, kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
