// Every collective of parallel::Group against a local computation, for several sizes and dtypes.
// Runs as one process (the discovered tests: the world is a local group) and as 2 MPI ranks
// (ctest's parallel_mpi_np2: mpiexec -np 2 test_parallel).
#include <gtest/gtest.h>

#include <cmath>

#include "backends/test_device/test_device.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"

using namespace spore;
using parallel::ReduceOp;

namespace {

parallel::GroupPtr group() {
  parallel::init("mpi");
  return parallel::world();
}

// Small integers: exact in every dtype (bf16 included), so sums compare exactly.
double value(int rank, int64_t i) { return double((i * 3 + rank * 5 + 1) % 7); }

Tensor filled(int rank, int64_t n, DType dt, int64_t base = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(rank, base + i);
  return from_vector(v, {n}).to(dt).contiguous();
}

std::vector<double> values(const Tensor& t) {
  return t.to(kFloat64).contiguous().to_vector<double>();
}

double tol(DType dt) { return dt == kFloat16 ? 1e-2 : dt == kBFloat16 ? 5e-2 : 1e-6; }

const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                 kInt32,   kInt64,   kInt8,    kUInt8};
const std::vector<int64_t> kSizes = {1, 7, 1000, 65537};

}  // namespace

TEST(Collectives, AllReduceSumMaxMinMean) {
  auto g = group();
  const int R = g->size(), me = g->rank();
  for (DType dt : kAll)
    for (int64_t n : kSizes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean}) {
        if (op == ReduceOp::Mean && !is_floating(dt)) continue;
        Tensor t = filled(me, n, dt);
        g->all_reduce(t, op);
        const std::vector<double> got = values(t);
        for (int64_t i = 0; i < n; ++i) {
          double e = op == ReduceOp::Max ? -1e30 : op == ReduceOp::Min ? 1e30 : 0;
          for (int r = 0; r < R; ++r) {
            const double v = value(r, i);
            e = op == ReduceOp::Max ? std::max(e, v) : op == ReduceOp::Min ? std::min(e, v) : e + v;
          }
          if (op == ReduceOp::Mean) e /= R;
          ASSERT_NEAR(got[size_t(i)], e, tol(dt) * std::max(1.0, std::abs(e)))
              << dtype_name(dt) << " n=" << n << " " << parallel::reduce_op_name(op) << " i=" << i;
        }
      }
}

TEST(Collectives, AllReduceAsyncInFlightTogether) {
  auto g = group();
  std::vector<Tensor> ts;
  std::vector<parallel::WorkPtr> ws;
  for (int k = 0; k < 5; ++k) {
    ts.push_back(filled(g->rank(), 1000 + k, kFloat32));
    ws.push_back(g->all_reduce_async(ts.back(), ReduceOp::Sum));
  }
  for (auto& w : ws) w->wait();
  ws[0]->wait();  // twice is fine
  for (int k = 0; k < 5; ++k) {
    const auto got = values(ts[size_t(k)]);
    for (int64_t i = 0; i < 1000 + k; ++i) {
      double e = 0;
      for (int r = 0; r < g->size(); ++r) e += value(r, i);
      ASSERT_EQ(got[size_t(i)], e);
    }
  }
}

TEST(Collectives, AllGatherReduceScatterBroadcast) {
  auto g = group();
  const int R = g->size(), me = g->rank();
  for (DType dt : kAll)
    for (int64_t n : kSizes) {
      Tensor gathered = g->all_gather(filled(me, n, dt));  // (R, n)
      ASSERT_EQ(gathered.shape(), (Shape{R, n}));
      const auto gv = values(gathered);
      for (int r = 0; r < R; ++r)
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(gv[size_t(r * n + i)], value(r, i)) << dtype_name(dt);

      Tensor in = filled(me, n * R, dt);  // rank r gets block r of the sum
      Tensor out = Tensor::empty({n}, dt);
      g->reduce_scatter(in, out, ReduceOp::Sum);
      const auto ov = values(out);
      for (int64_t i = 0; i < n; ++i) {
        double e = 0;
        for (int r = 0; r < R; ++r) e += value(r, me * n + i);
        ASSERT_NEAR(ov[size_t(i)], e, tol(dt) * std::max(1.0, e)) << dtype_name(dt) << " n=" << n;
      }

      const int root = R - 1;
      Tensor b = filled(me, n, dt);
      g->broadcast(b, root);
      const auto bv = values(b);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bv[size_t(i)], value(root, i)) << dtype_name(dt);
    }
}

TEST(Collectives, BoolAnyAll) {
  auto g = group();
  Tensor t = from_vector(std::vector<double>{g->rank() == 0 ? 1.0 : 0.0, 1, 0}, {3})
                 .to(kBool)
                 .contiguous();
  Tensor any = t.clone(), all = t.clone();
  g->all_reduce(any, ReduceOp::Max);
  g->all_reduce(all, ReduceOp::Min);
  EXPECT_EQ(values(any), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(values(all), (std::vector<double>{g->size() == 1 ? 1.0 : 0.0, 1, 0}));
  EXPECT_THROW(g->all_reduce(t, ReduceOp::Sum), Error);
}

TEST(Collectives, SendRecvRingAndBarrier) {
  auto g = group();
  if (g->size() < 2) GTEST_SKIP() << "needs 2 ranks (ctest parallel_mpi_np2)";
  const int me = g->rank(), R = g->size();
  for (DType dt : {kFloat32, kInt64, kBFloat16})
    for (int64_t n : kSizes) {
      Tensor out = filled(me, n, dt), in = Tensor::empty({n}, dt);
      auto rw = g->recv_async(in, (me + R - 1) % R, 7);
      auto sw = g->send_async(out, (me + 1) % R, 7);
      sw->wait();
      rw->wait();
      const auto v = values(in);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[size_t(i)], value((me + R - 1) % R, i));
    }
  g->barrier();
}

// Device tensors (the test device: memory the host cannot touch outside a copy): the MPI and
// local groups stage them through the host, and the results land in the device tensors.
TEST(Collectives, DeviceTensorsAreStagedThroughTheHost) {
  enable_test_device();
  auto g = group();
  const int R = g->size(), me = g->rank();
  const Device dev{DeviceType::Test, 0};
  for (DType dt : {kFloat32, kInt64})
    for (int64_t n : {int64_t(7), int64_t(65537)}) {
      Tensor t = filled(me, n, dt).to(dev);
      g->all_reduce(t, ReduceOp::Sum);
      Tensor a = filled(me, n, dt).to(dev);
      g->all_reduce_async(a, ReduceOp::Max)->wait();
      const auto tv = values(t), av = values(a);
      for (int64_t i = 0; i < n; ++i) {
        double sum = 0, mx = -1e30;
        for (int r = 0; r < R; ++r) sum += value(r, i), mx = std::max(mx, value(r, i));
        ASSERT_EQ(tv[size_t(i)], sum) << dtype_name(dt) << " n=" << n;
        ASSERT_EQ(av[size_t(i)], mx) << dtype_name(dt) << " n=" << n;
      }
      EXPECT_EQ(t.device(), dev);

      const Tensor gathered = g->all_gather(filled(me, n, dt).to(dev));
      EXPECT_EQ(gathered.device(), dev);
      const auto gv = values(gathered);
      for (int r = 0; r < R; ++r)
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(gv[size_t(r * n + i)], value(r, i));

      Tensor out = Tensor::empty({n}, dt, dev);
      g->reduce_scatter(filled(me, n * R, dt).to(dev), out, ReduceOp::Sum);
      const auto ov = values(out);
      for (int64_t i = 0; i < n; ++i) {
        double e = 0;
        for (int r = 0; r < R; ++r) e += value(r, me * n + i);
        ASSERT_EQ(ov[size_t(i)], e);
      }

      Tensor b = filled(me, n, dt).to(dev);
      g->broadcast(b, R - 1);
      const auto bv = values(b);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bv[size_t(i)], value(R - 1, i));

      if (R >= 2) {
        Tensor in = Tensor::empty({n}, dt, dev);
        auto rw = g->recv_async(in, (me + R - 1) % R, 9);
        g->send_async(filled(me, n, dt).to(dev), (me + 1) % R, 9)->wait();
        rw->wait();
        const auto iv = values(in);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(iv[size_t(i)], value((me + R - 1) % R, i));
      }
    }
}

TEST(Collectives, ErrorsNameTheProblem) {
  auto g = group();
  Tensor m = zeros({4, 4}).t();  // a non-contiguous view
  try {
    g->all_reduce(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
  Tensor i = zeros({3}, kInt32);
  EXPECT_THROW(g->all_reduce(i, ReduceOp::Mean), Error);
  Tensor small = zeros({3});
  EXPECT_THROW(g->all_gather(small, zeros({2})), Error);
}
