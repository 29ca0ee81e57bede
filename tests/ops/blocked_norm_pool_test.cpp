// The `blocked` (nChw16c, 5-D (N, ceil(C/16), H, W, 16)) variants of max_pool2d,
// max_pool2d_backward, batch_norm and batch_norm_backward against the plain ops, with the
// NCHW <-> blocked re-layout written here as plain loops (not the to_blocked / from_blocked ops).
// Input padding lanes hold finite garbage where the contract allows it; output padding lanes
// must be exactly zero.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/op.h"
#include "spore/spore.h"
#include "test_util.h"

namespace spore {
namespace {

using ops::Attrs;
using ops::OpId;
using ::spore::test::error_of;

int64_t blocks(int64_t c) { return (c + 15) / 16; }

// Plain (N, C, H, W) -> blocked (N, Cb, H, W, 16); padding lanes get pad(i) (finite).
template <typename Pad>
std::vector<float> to_blk(const std::vector<float>& v, int64_t N, int64_t C, int64_t H, int64_t W,
                          Pad pad) {
  const int64_t Cb = blocks(C);
  std::vector<float> r(size_t(N * Cb * H * W * 16));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < Cb; ++cb)
      for (int64_t s = 0; s < H * W; ++s)
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t c = cb * 16 + l;
          const size_t o = size_t(((n * Cb + cb) * H * W + s) * 16 + l);
          r[o] = c < C ? v[size_t((n * C + c) * H * W + s)] : pad(o);
        }
  return r;
}
std::vector<float> to_blk(const std::vector<float>& v, int64_t N, int64_t C, int64_t H, int64_t W) {
  return to_blk(v, N, C, H, W, [](size_t) { return 0.0f; });
}
// Finite garbage for padding lanes: large, of both signs.
float garbage(size_t i) { return float(int64_t(i * 2654435761u % 2001) - 1000) * 1e3f; }

// Blocked -> plain, and every padding lane's value (for the "exactly zero" checks).
template <typename T>
std::vector<T> from_blk(const std::vector<T>& b, int64_t N, int64_t C, int64_t H, int64_t W,
                        std::vector<T>* padding = nullptr) {
  const int64_t Cb = blocks(C);
  std::vector<T> r(size_t(N * C * H * W));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < Cb; ++cb)
      for (int64_t s = 0; s < H * W; ++s)
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t c = cb * 16 + l;
          const T v = b[size_t(((n * Cb + cb) * H * W + s) * 16 + l)];
          if (c < C)
            r[size_t((n * C + c) * H * W + s)] = v;
          else if (padding)
            padding->push_back(v);
        }
  return r;
}

Shape blk_shape(int64_t N, int64_t C, int64_t H, int64_t W) { return {N, blocks(C), H, W, 16}; }

Attrs pool_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                 bool ceil = false) {
  Attrs a;
  a.set("kernel_size", k).set("stride", s).set("padding", p).set("ceil_mode", ceil);
  return a;
}
Attrs blocked(Attrs a) {
  a.set("blocked", true);
  return a;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(want[i])
                        ? std::isnan(got[i])
                        : std::abs(double(got[i]) - want[i]) <= rel * (1.0 + std::abs(want[i]));
    if (!ok && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ";
}
template <typename T>
void expect_zero(const std::vector<T>& pad, const char* what) {
  size_t bad = 0;
  for (T v : pad) bad += v != T(0);
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << pad.size()
                     << " padding lanes are not zero";
}

// max_pool2d and max_pool2d_backward, blocked vs plain, for one geometry.
void check_pool(int64_t N, int64_t C, int64_t H, int64_t W, const Attrs& a, bool nans = false) {
  SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " H=" << H << " W=" << W);
  set_seed(uint64_t(N * 131 + C * 17 + H));
  std::vector<float> xv = randn({N, C, H, W}).to_vector<float>();
  if (nans) {
    for (size_t i = 0; i < xv.size(); i += 37) xv[i] = std::nanf("");
    for (size_t i = 5; i < xv.size(); i += 11) xv[i + 1] = xv[i];  // ties
  }
  auto plain = ops::call(OpId::MaxPool2d, {from_vector(xv, {N, C, H, W})}, a);
  const Shape ys = plain[0].shape();
  const int64_t OH = ys[2], OW = ys[3];
  const std::vector<float> y = plain[0].to_vector<float>();
  const std::vector<int64_t> idx = plain[1].to_vector<int64_t>();

  // Zero-padded input (what every blocked producer writes).
  auto blk = ops::call(OpId::MaxPool2d,
                       {from_vector(to_blk(xv, N, C, H, W), blk_shape(N, C, H, W))}, blocked(a));
  ASSERT_EQ(blk[0].shape(), blk_shape(N, C, OH, OW));
  ASSERT_EQ(blk[1].shape(), blk_shape(N, C, OH, OW));
  ASSERT_EQ(blk[1].dtype(), kInt64);
  std::vector<float> ypad;
  expect_close(from_blk(blk[0].to_vector<float>(), N, C, OH, OW, &ypad), y, 0, "y");
  expect_zero(ypad, "y");
  // The kernel's indices happen to mean what the plain kernel's mean (h * W + w in the plane).
  // Without `channels` the padding lanes are pooled like the others (their indices need not be 0).
  EXPECT_EQ(from_blk(blk[1].to_vector<int64_t>(), N, C, OH, OW), idx);

  // Garbage input padding with the logical channel count given: padding still comes out zero.
  Attrs ac = blocked(a);
  ac.set("channels", C);
  auto blk_g = ops::call(OpId::MaxPool2d,
                         {from_vector(to_blk(xv, N, C, H, W, garbage), blk_shape(N, C, H, W))}, ac);
  ypad.clear();
  expect_close(from_blk(blk_g[0].to_vector<float>(), N, C, OH, OW, &ypad), y, 0,
               "y (garbage padding)");
  expect_zero(ypad, "y (garbage padding)");
  std::vector<int64_t> ipad;
  EXPECT_EQ(from_blk(blk_g[1].to_vector<int64_t>(), N, C, OH, OW, &ipad), idx);
  expect_zero(ipad, "indices (garbage padding)");

  // Backward: dy's padding lanes hold garbage; input_shape stays logical.
  const std::vector<float> dyv = randn({N, C, OH, OW}).to_vector<float>();
  Attrs ab = a;
  ab.set("input_shape", Shape{N, C, H, W});
  const std::vector<float> dx =
      ops::call1(OpId::MaxPool2dBackward, {from_vector(dyv, {N, C, OH, OW}), plain[1]}, ab)
          .to_vector<float>();
  Tensor dxb =
      ops::call1(OpId::MaxPool2dBackward,
                 {from_vector(to_blk(dyv, N, C, OH, OW, garbage), blk_shape(N, C, OH, OW)), blk[1]},
                 blocked(ab));
  ASSERT_EQ(dxb.shape(), blk_shape(N, C, H, W));
  std::vector<float> dxpad;
  expect_close(from_blk(dxb.to_vector<float>(), N, C, H, W, &dxpad), dx, 1e-6, "dx");
  expect_zero(dxpad, "dx");
}

TEST(BlockedPool, LeNetShapes) {
  check_pool(64, 6, 28, 28, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}));
  check_pool(64, 16, 10, 10, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}));
}

TEST(BlockedPool, TwoBlocksOddSizesNanAndTies) {
  check_pool(3, 32, 9, 7, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}), true);
}

TEST(BlockedPool, OverlappingPaddedAndCeilMode) {
  check_pool(2, 20, 11, 11, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}));
  check_pool(2, 6, 7, 8, pool_attrs({3, 3}, {2, 2}, {0, 0, 0, 0}, true), true);
  check_pool(2, 40, 9, 9, pool_attrs({2, 3}, {1, 2}, {1, 0, 0, 1}));
}

// batch_norm and batch_norm_backward, blocked vs plain, with garbage in the input padding lanes.
void check_bn(int64_t N, int64_t C, int64_t H, int64_t W) {
  SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " H=" << H << " W=" << W);
  set_seed(uint64_t(N * 7 + C));
  const Shape ps{N, C, H, W}, bs = blk_shape(N, C, H, W);
  const std::vector<float> xv = (randn(ps) * 2.0 + 0.5).to_vector<float>();
  const std::vector<float> dyv = randn(ps).to_vector<float>();
  Tensor gamma = randn({C}), beta = randn({C});
  Attrs a;
  a.set("eps", 1e-5);
  auto plain = ops::call(OpId::BatchNorm, {from_vector(xv, ps), gamma, beta}, a);
  Tensor xb = from_vector(to_blk(xv, N, C, H, W, garbage), bs);
  auto blk = ops::call(OpId::BatchNorm, {xb, gamma, beta}, blocked(a));
  ASSERT_EQ(blk[0].shape(), bs);
  ASSERT_EQ(blk[1].shape(), Shape{C});
  ASSERT_EQ(blk[2].shape(), Shape{C});
  std::vector<float> pad;
  expect_close(from_blk(blk[0].to_vector<float>(), N, C, H, W, &pad), plain[0].to_vector<float>(),
               1e-5, "y");
  expect_zero(pad, "y");
  expect_close(blk[1].to_vector<float>(), plain[1].to_vector<float>(), 1e-5, "mean");
  expect_close(blk[2].to_vector<float>(), plain[2].to_vector<float>(), 1e-5, "invstd");

  // Backward with the plain op's statistics for both.
  auto gp = ops::call(OpId::BatchNormBackward,
                      {from_vector(dyv, ps), from_vector(xv, ps), gamma, plain[1], plain[2]}, a);
  auto gb =
      ops::call(OpId::BatchNormBackward,
                {from_vector(to_blk(dyv, N, C, H, W, garbage), bs), xb, gamma, plain[1], plain[2]},
                blocked(a));
  ASSERT_EQ(gb[0].shape(), bs);
  pad.clear();
  expect_close(from_blk(gb[0].to_vector<float>(), N, C, H, W, &pad), gp[0].to_vector<float>(), 1e-5,
               "dx");
  expect_zero(pad, "dx");
  // dgamma / dbeta are sums over N*H*W terms: relative to that scale.
  const double scale = std::sqrt(double(N * H * W));
  std::vector<float> dg = gb[1].to_vector<float>(), db = gb[2].to_vector<float>();
  const std::vector<float> dgp = gp[1].to_vector<float>(), dbp = gp[2].to_vector<float>();
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(dg[size_t(c)], dgp[size_t(c)], 1e-5 * (scale + std::abs(dgp[size_t(c)])))
        << "dgamma " << c;
    EXPECT_NEAR(db[size_t(c)], dbp[size_t(c)], 1e-5 * (scale + std::abs(dbp[size_t(c)])))
        << "dbeta " << c;
  }
}

TEST(BlockedBatchNorm, FourBlocks) { check_bn(32, 64, 8, 8); }
TEST(BlockedBatchNorm, PaddedSixChannels) { check_bn(4, 6, 5, 7); }
TEST(BlockedBatchNorm, PlanesLargerThanOneTask) { check_bn(2, 20, 30, 31); }  // 930 pixels: 2 tasks

// A hand-computed case: one channel, values 1..4 -> mean 2.5, variance 1.25.
TEST(BlockedBatchNorm, HandComputed) {
  std::vector<float> xb(4 * 16, 7.0f);  // (1, 1, 2, 2, 16), padding lanes 7
  for (int s = 0; s < 4; ++s) xb[size_t(s * 16)] = float(s + 1);
  Attrs a;
  a.set("eps", 0.0).set("blocked", true);
  auto r =
      ops::call(OpId::BatchNorm, {from_vector(xb, {1, 1, 2, 2, 16}), ones({1}), zeros({1})}, a);
  EXPECT_FLOAT_EQ(r[1].to_vector<float>()[0], 2.5f);
  EXPECT_FLOAT_EQ(r[2].to_vector<float>()[0], float(1 / std::sqrt(1.25)));
  const std::vector<float> y = r[0].to_vector<float>();
  for (int s = 0; s < 4; ++s) {
    EXPECT_NEAR(y[size_t(s * 16)], (s + 1 - 2.5) / std::sqrt(1.25), 1e-6);
    for (int l = 1; l < 16; ++l) EXPECT_EQ(y[size_t(s * 16 + l)], 0.0f);
  }
}

std::string bn_error(const Shape& x, int64_t C, DType t = kFloat32) {
  Attrs a;
  a.set("eps", 1e-5).set("blocked", true);
  return error_of([&] { ops::call(OpId::BatchNorm, {zeros(x, t), ones({C}), zeros({C})}, a); });
}

TEST(BlockedErrors, Shapes) {
  const Attrs a = blocked(pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}));
  std::string m = error_of([&] { ops::call(OpId::MaxPool2d, {zeros({2, 6, 8, 8})}, a); });
  EXPECT_NE(m.find("max_pool2d"), std::string::npos) << m;
  EXPECT_NE(m.find("(N, ceil(C/L), H, W, L) with L = 8 or 16"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 6, 8, 8)"), std::string::npos) << m;
  m = error_of([&] { ops::call(OpId::MaxPool2d, {zeros({2, 1, 8, 8, 4})}, a); });
  EXPECT_NE(m.find("(2, 1, 8, 8, 4)"), std::string::npos) << m;
  m = error_of([&] { ops::call(OpId::MaxPool2d, {zeros({2, 1, 8, 8, 16}, kFloat64)}, a); });
  EXPECT_NE(m.find("float32 only"), std::string::npos) << m;
  Attrs ac = a;
  ac.set("channels", int64_t(20));
  m = error_of([&] { ops::call(OpId::MaxPool2d, {zeros({2, 1, 8, 8, 16})}, ac); });
  EXPECT_NE(m.find("channels=20"), std::string::npos) << m;
  EXPECT_NE(m.find("(N, 2, H, W, 16)"), std::string::npos) << m;

  Attrs ab = a;
  ab.set("input_shape", Shape{2, 20, 8, 8});  // Cb = 2, so dy must be (2, 2, 4, 4, 16)
  m = error_of([&] {
    ops::call(OpId::MaxPool2dBackward, {zeros({2, 1, 4, 4, 16}), zeros({2, 1, 4, 4, 16}, kInt64)},
              ab);
  });
  EXPECT_NE(m.find("max_pool2d_backward"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 2, 4, 4, 16)"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 1, 4, 4, 16)"), std::string::npos) << m;

  m = bn_error({4, 1, 3, 3, 16}, 20);  // C = 20 needs 2 blocks
  EXPECT_NE(m.find("batch_norm"), std::string::npos) << m;
  EXPECT_NE(m.find("C=20"), std::string::npos) << m;
  EXPECT_NE(m.find("(N, 2, H, W, 16)"), std::string::npos) << m;
  EXPECT_NE(m.find("(4, 1, 3, 3, 16)"), std::string::npos) << m;
  m = bn_error({4, 6, 3, 3}, 6);
  EXPECT_NE(m.find("(N, ceil(C/L), H, W, L) with L = 8 or 16"), std::string::npos) << m;
  m = bn_error({4, 1, 3, 3, 16}, 6, kFloat64);
  EXPECT_NE(m.find("float32 only"), std::string::npos) << m;

  Attrs bb;
  bb.set("blocked", true);
  m = error_of([&] {
    ops::call(OpId::BatchNormBackward,
              {zeros({4, 2, 3, 3, 16}), zeros({4, 2, 3, 3, 16}), ones({6}), zeros({6}), ones({6})},
              bb);
  });
  EXPECT_NE(m.find("batch_norm_backward"), std::string::npos) << m;
  EXPECT_NE(m.find("C=6"), std::string::npos) << m;
}

}  // namespace
}  // namespace spore
