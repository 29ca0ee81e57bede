// Core tests: dtypes and promotion, half/bfloat16 conversion, shapes and views, factories,
// the caching allocator, the seeded RNG, printing, the backend registry and the context.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "spore/spore.h"
#include "test_util.h"

namespace spore {
namespace {

using ::spore::test::error_of;

TEST(DType, PromotionLattice) {
  EXPECT_EQ(promote_types(kInt32, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt32);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  for (int a = 0; a < kNumDTypes; ++a)
    for (int b = 0; b < kNumDTypes; ++b)
      EXPECT_EQ(promote_types(DType(a), DType(b)), promote_types(DType(b), DType(a)));
}

TEST(DType, NamesRoundTrip) {
  for (int a = 0; a < kNumDTypes; ++a) EXPECT_EQ(dtype_from_name(dtype_name(DType(a))), DType(a));
  EXPECT_EQ(dtype_from_name("bf16"), kBFloat16);
  EXPECT_NE(error_of([] { dtype_from_name("float8"); }).find("unknown dtype 'float8'"),
            std::string::npos);
}

TEST(DType, HalfConversionIsExactWhereRepresentable) {
  for (float f :
       {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f})
    EXPECT_EQ(float(Half(f)), f) << f;
  EXPECT_TRUE(std::isinf(float(Half(70000.0f))));
  EXPECT_TRUE(std::isnan(float(Half(NAN))));
  EXPECT_EQ(float(Half(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
  // Every half bit pattern survives half -> float -> half.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if (((b >> 10) & 0x1f) == 0x1f && (b & 0x3ff)) continue;  // NaNs
    EXPECT_EQ(float_to_half(half_to_float(uint16_t(b))), b) << b;
  }
  EXPECT_EQ(float(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(float(BFloat16(3.140625f)), 3.140625f);
  EXPECT_EQ(float(BFloat16(1.00390625f)), 1.0f);  // halfway, rounds to even
}

TEST(Tensor, FactoriesAndNestedLists) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(arange(0, 5, 2).to_vector<float>(), (std::vector<float>{0, 2, 4}));
  EXPECT_EQ(linspace(0, 1, 5).to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(eye(2, 3).to_vector<int>(), (std::vector<int>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(full({2}, 7, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
  EXPECT_NE(error_of([] { tensor({{1, 2}, {3}}); }).find("ragged"), std::string::npos);
  std::vector<int32_t> buf{1, 2, 3, 4};
  EXPECT_EQ(from_vector(buf, {2, 2}).to_vector<int32_t>(), buf);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(0, 24).reshape({2, 3, 4});
  Tensor t = a.transpose(0, 2);  // (4, 3, 2)
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.impl().storage, a.impl().storage);
  EXPECT_EQ(t.contiguous().to_vector<float>()[1], 12.0f);  // t[0,0,1] = a[1,0,0]
  Tensor s = a.slice(2, 1, 4, 2);                          // (2, 3, 2): columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(s.impl().storage, a.impl().storage);
  Tensor e = tensor({1, 2, 3}).reshape({3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.to_vector<float>()[5], 2.0f);
  EXPECT_EQ(a.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(a.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(a.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(a.select(1, -1).to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  // A transposed tensor cannot be view()ed flat but can be reshape()d (with a copy).
  EXPECT_NE(error_of([&] { t.view({24}); }).find("without a copy"), std::string::npos);
  EXPECT_EQ(t.reshape({24}).numel(), 24);
  // view of a sliced-but-viewable tensor keeps sharing
  Tensor rows = a.reshape({6, 4}).slice(0, 2, 4);  // contiguous rows 2..3
  EXPECT_EQ(rows.view({8}).impl().storage, a.impl().storage);
  EXPECT_EQ(rows.view({8}).to_vector<float>()[0], 8.0f);
}

TEST(Tensor, ViewErrorsNameTheProblem) {
  Tensor a = zeros({2, 3});
  EXPECT_NE(error_of([&] {
              a.reshape({4, 2});
            }).find("cannot reshape (2, 3) (6 elements) into (4, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { a.permute({0, 0}); }).find("[permute]"), std::string::npos);
  EXPECT_NE(error_of([&] {
              a.expand({3, 3});
            }).find("cannot expand shape (2, 3)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { a.transpose(0, 2); }).find("axis 2 is out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { a.data<double>(); }).find("dtype float32"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor().shape(); }).find("undefined"), std::string::npos);
}

TEST(Tensor, CastBetweenDTypes) {
  Tensor a = tensor({-1.5, 0, 2.25});
  EXPECT_EQ(a.to(kInt32).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 2}));
  EXPECT_EQ(a.to(kBool).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(a.to(kFloat16).to(kFloat64).to_vector<double>(), (std::vector<double>{-1.5, 0, 2.25}));
  EXPECT_EQ(a.to(kBFloat16).dtype(), kBFloat16);
}

TEST(Allocator, CachesBlocksAndTracksPeak) {
  Allocator& al = cpu_allocator();
  al.reset_peak();
  const AllocatorStats s0 = al.stats();
  {
    Tensor a = Tensor::empty({1 << 20});  // 4 MiB
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data_ptr()) % 64, 0u);
    EXPECT_GE(al.stats().bytes_in_use, s0.bytes_in_use + (4u << 20));
  }
  const AllocatorStats s1 = al.stats();
  EXPECT_GE(s1.peak_bytes_in_use, s0.bytes_in_use + (4u << 20));
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use);
  Tensor b = Tensor::empty({1 << 20});  // same size: served from the cache
  EXPECT_EQ(al.stats().cache_hits, s1.cache_hits + 1);
}

TEST(Random, SeededAndReproducible) {
  set_seed(42);
  std::vector<float> a = randn({1000}).to_vector<float>();
  set_seed(42);
  std::vector<float> b = randn({1000}).to_vector<float>();
  EXPECT_EQ(a, b);
  std::vector<float> c = randn({1000}).to_vector<float>();
  EXPECT_NE(a, c);
  double mean = 0, sq = 0;
  set_seed(7);
  std::vector<double> n = randn({100000}, kFloat64).to_vector<double>();
  for (double v : n) mean += v, sq += v * v;
  mean /= double(n.size());
  EXPECT_NEAR(mean, 0, 0.02);
  EXPECT_NEAR(sq / double(n.size()) - mean * mean, 1, 0.02);
  std::vector<double> u = rand({100000}, kFloat64).to_vector<double>();
  double lo = 1, hi = 0, um = 0;
  for (double v : u) lo = std::min(lo, v), hi = std::max(hi, v), um += v;
  EXPECT_GE(lo, 0);
  EXPECT_LT(hi, 1);
  EXPECT_NEAR(um / double(u.size()), 0.5, 0.01);
  std::vector<int64_t> p = randperm(10).to_vector<int64_t>();
  std::sort(p.begin(), p.end());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[size_t(i)], i);
}

TEST(Print, LikeNumpy) {
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).str(), "[[1. 2.]\n [3. 4.]]");
  EXPECT_EQ(tensor({1.5, 2.25, -3}).str(), "[ 1.5   2.25 -3.  ]");
  EXPECT_EQ(tensor({1, 2, 3}, kInt64).str(), "[1 2 3]");
  EXPECT_EQ(tensor({1, 0}, kBool).str(), "[ True False]");
  EXPECT_EQ(scalar_tensor(3.5).str(), "3.5");
  EXPECT_NE(arange(0, 2000).str().find("..."), std::string::npos);
}

TEST(Backend, RegistryAndDeviceErrors) {
  EXPECT_TRUE(has_backend(DeviceType::CPU));
  const std::vector<std::string> targets = available_device_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(targets[0], "CPU");
  const bool cuda_built = targets.size() > 1 && targets[1] == "GPU";  // libspore_cuda.so loaded
  const std::string msg = error_of([] { set_device("Ascend"); });
  EXPECT_NE(
      msg.find(cuda_built ? "Unsupported device target Ascend. This build supports ['CPU', 'GPU']."
                          : "Unsupported device target Ascend. This build supports ['CPU']."),
      std::string::npos)
      << msg;
  // Two different messages: no CUDA backend in this build, or the backend but no GPU on this
  // machine.
  const std::string gpu = error_of([] { set_device("GPU"); });
  if (cuda_built && get_backend(DeviceType::GPU).device_count() == 0)
    EXPECT_NE(gpu.find("this build has the GPU backend, but no GPU is visible"), std::string::npos)
        << gpu;
  else if (!cuda_built)
    EXPECT_NE(gpu.find("no CUDA backend"), std::string::npos) << gpu;
  EXPECT_NE(error_of([] { set_device("TPU"); }).find("Expected one of 'CPU', 'GPU', 'Ascend'"),
            std::string::npos);
  EXPECT_NO_THROW(set_device("CPU"));
  EXPECT_FALSE(get_backend(DeviceType::CPU).library_versions().empty());
}

TEST(Context, ModesByName) {
  EXPECT_EQ(mode_from_name("GRAPH"), Mode::Graph);
  EXPECT_EQ(mode_from_name("pynative"), Mode::PyNative);
  EXPECT_NE(error_of([] { mode_from_name("jit"); }).find("expected 'graph' or 'pynative'"),
            std::string::npos);
  EXPECT_EQ(get_context_mode(), Mode::PyNative);
}

// Flush-to-zero is on by default (SPORE_FLUSH_DENORMAL=0 turns it off): a float32 denormal input
// reads as 0 in the kernels, on the calling thread and on the pool's threads alike.
TEST(Context, FlushDenormal) {
  ASSERT_TRUE(flush_denormal());
  const float tiny = 1e-39f;  // below FLT_MIN (1.18e-38): a denormal
  ASSERT_TRUE(set_flush_denormal(false));
  Tensor x = full({1 << 16}, tiny);  // large enough to run on both threads
  Tensor z = x * 2.0;
  for (float v : z.to_vector<float>()) ASSERT_EQ(v, 2 * tiny);
  ASSERT_TRUE(set_flush_denormal(true));
  Tensor y = x * 2.0;  // the denormal input now reads as 0
  for (float v : y.to_vector<float>()) ASSERT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace spore
