// The dataset pipeline on in-memory data: TensorDataset, Map (serial and with workers), Shuffle,
// Batch (with and without prefetch), Take/Skip/Repeat, exact sizes, the vision transforms, and
// clean shutdown when an iterator is dropped early.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "data_util.h"
#include "spore/context.h"
#include "spore/data/dataset.h"
#include "test_util.h"

using namespace spore;

namespace {

template <typename T>
std::vector<T> values(const Tensor& t) {  // contiguous tensors only; no op dispatch
  EXPECT_TRUE(t.is_contiguous());
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

// A dataset of n rows: "x" float32 (3,) = {i, i + 0.5, -i}, "y" int32 = i.
data::Dataset numbers(int64_t n) {
  Tensor x = Tensor::empty({n, 3}, kFloat32);
  Tensor y = Tensor::empty({n}, kInt32);
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i * 3] = float(i);
    x.data<float>()[i * 3 + 1] = float(i) + 0.5f;
    x.data<float>()[i * 3 + 2] = -float(i);
    y.data<int32_t>()[i] = int32_t(i);
  }
  return data::TensorDataset({x, y}, {"x", "y"});
}

// Column 1 of every row (scalars) or flattened (batches), in order.
std::vector<int32_t> ys(const data::Dataset& ds) {
  std::vector<int32_t> out;
  auto it = ds.create_tuple_iterator();
  while (auto row = it->next())
    for (int32_t v : values<int32_t>((*row)[1])) out.push_back(v);
  return out;
}

int64_t count_rows(const data::Dataset& ds) {
  int64_t n = 0;
  auto it = ds.create_tuple_iterator();
  while (it->next()) ++n;
  return n;
}

using ::spore::test::error_of;

using ::spore::testing_data::within;

std::vector<int32_t> iota_vec(int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

}  // namespace

TEST(TensorDataset, RowsAreSlices) {
  auto ds = numbers(5);
  EXPECT_EQ(ds.get_dataset_size(), 5);
  EXPECT_EQ(ds.get_batch_size(), 1);
  auto it = ds.create_tuple_iterator();
  auto r0 = it->next();
  auto r1 = it->next();
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ((*r1)[0].shape(), (Shape{3}));
  EXPECT_EQ(values<float>((*r1)[0]), (std::vector<float>{1, 1.5f, -1}));
  EXPECT_EQ((*r1)[1].dim(), 0);
  EXPECT_EQ(ys(ds), iota_vec(5));
  // Errors name the problem.
  EXPECT_NE(error_of([] {
              data::TensorDataset({Tensor::empty({3}), Tensor::empty({4})}, {"a", "b"});
            }).find("rows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ds.map({vision::Rescale(2)}, "image"); }).find("\"x\", \"y\""),
            std::string::npos);
}

TEST(Batch, ShapesValuesAndRemainder) {
  for (int64_t prefetch : {0, 2}) {
    data::set_prefetch_size(prefetch);
    auto ds = numbers(10).batch(4);
    EXPECT_EQ(ds.get_dataset_size(), 3);
    EXPECT_EQ(ds.get_batch_size(), 4);
    auto it = ds.create_tuple_iterator();
    std::vector<Shape> shapes;
    std::vector<float> xs;
    while (auto row = it->next()) {
      shapes.push_back((*row)[0].shape());
      EXPECT_EQ((*row)[1].shape(), (Shape{(*row)[0].shape()[0]}));
      for (float v : values<float>((*row)[0])) xs.push_back(v);
    }
    EXPECT_EQ(shapes, (std::vector<Shape>{{4, 3}, {4, 3}, {2, 3}}));
    ASSERT_EQ(xs.size(), 30u);
    EXPECT_EQ(xs[27], 9.f);
    EXPECT_EQ(xs[29], -9.f);
    auto dropped = numbers(10).batch(4, true);
    EXPECT_EQ(dropped.get_dataset_size(), 2);
    EXPECT_EQ(count_rows(dropped), 2);
    EXPECT_EQ(ys(dropped), iota_vec(8));
  }
  data::set_prefetch_size(2);
}

TEST(Batch, MismatchedRowsAreAnError) {
  auto ds = numbers(4)
                .map({[](const Tensor& x) {
                       const int64_t n = int64_t(x.data<float>()[0]) + 1;
                       return Tensor::empty({n}, kFloat32);
                     }},
                     "x")
                .batch(2);
  auto it = ds.create_tuple_iterator();
  const std::string msg = error_of([&] { it->next(); });
  EXPECT_NE(msg.find("column \"x\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32 (2,)"), std::string::npos) << msg;
}

TEST(Map, AppliesOpsInOrder) {
  auto ds = numbers(4).map({[](const Tensor& x) {
                              Tensor y = Tensor::empty(x.shape(), kFloat32);
                              for (int64_t i = 0; i < x.numel(); ++i)
                                y.data<float>()[i] = x.data<float>()[i] * 2;
                              return y;
                            },
                            vision::Rescale(1, 1)},
                           "x");
  auto it = ds.create_tuple_iterator();
  it->next();
  auto r = it->next();
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{3, 4, -1}));
}

TEST(Map, WorkersKeepOrder) {
  // Rows take uneven times, so workers finish out of order; the output must not.
  auto slow_copy = [](const Tensor& y) {
    const int32_t v = y.data<int32_t>()[0];
    std::this_thread::sleep_for(std::chrono::microseconds((v * 7919) % 13 * 150));
    Tensor out = Tensor::empty({}, kInt32);
    out.data<int32_t>()[0] = v * 10;
    return out;
  };
  for (int workers : {1, 3, 8}) {
    auto ds = numbers(60).map({slow_copy}, "y", workers);
    std::vector<int32_t> expect;
    for (int i = 0; i < 60; ++i) expect.push_back(i * 10);
    within(30, [&] { EXPECT_EQ(ys(ds), expect) << workers << " workers"; });
    within(30, [&] { EXPECT_EQ(ys(ds.batch(7)), expect) << workers << " workers, batched"; });
  }
}

TEST(Map, ErrorsReachTheCallerInOrder) {
  auto fail_on_3 = [](const Tensor& y) {
    SPORE_CHECK(y.data<int32_t>()[0] != 3, "row three is bad");
    return y;
  };
  for (int workers : {1, 4}) {
    auto ds = numbers(8).map({fail_on_3}, "y", workers);
    auto it = ds.create_tuple_iterator();
    for (int i = 0; i < 3; ++i) {
      auto r = it->next();
      ASSERT_TRUE(r);
      EXPECT_EQ(values<int32_t>((*r)[1])[0], i);
    }
    const std::string msg = error_of([&] { it->next(); });
    EXPECT_NE(msg.find("row three is bad"), std::string::npos) << msg;
    EXPECT_NE(msg.find("column \"y\""), std::string::npos) << msg;
  }
  // Through a prefetching batch as well.
  auto b = numbers(8).map({fail_on_3}, "y", 2).batch(2);
  auto it = b.create_tuple_iterator();
  EXPECT_TRUE(it->next());
  EXPECT_NE(error_of([&] { it->next(); }).find("row three"), std::string::npos);
}

TEST(Shuffle, SeededPermutationReshuffledEachEpoch) {
  set_seed(42);
  auto a = numbers(40).shuffle(40);
  auto e0 = ys(a), e1 = ys(a);
  set_seed(42);
  auto b = numbers(40).shuffle(40);
  EXPECT_EQ(ys(b), e0);
  EXPECT_EQ(ys(b), e1);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, iota_vec(40));
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota_vec(40));
  EXPECT_EQ(a.get_dataset_size(), 40);
  // A buffer of one row shuffles nothing; a small buffer keeps every row exactly once.
  EXPECT_EQ(ys(numbers(10).shuffle(1)), iota_vec(10));
  auto small = ys(numbers(30).shuffle(4));
  std::sort(small.begin(), small.end());
  EXPECT_EQ(small, iota_vec(30));
}

TEST(TakeSkipRepeat, ContentsAndExactSizes) {
  auto ds = numbers(10);
  EXPECT_EQ(ys(ds.take(3)), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(ys(ds.skip(7)), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(ds.skip(12).get_dataset_size(), 0);
  EXPECT_EQ(count_rows(ds.skip(12)), 0);
  EXPECT_EQ(ds.take(20).get_dataset_size(), 10);
  EXPECT_EQ(ys(ds.take(2).repeat(3)), (std::vector<int32_t>{0, 1, 0, 1, 0, 1}));
  // Sizes are exact through any chain.
  const std::vector<data::Dataset> chains = {
      ds.repeat(3).batch(4), ds.shuffle(3).skip(1).batch(3, true), ds.batch(3).repeat(2).take(5),
      ds.map({vision::Rescale(2)}, "x", 2).skip(2).take(5).batch(2)};
  for (const auto& c : chains) EXPECT_EQ(c.get_dataset_size(), count_rows(c));
  EXPECT_NE(error_of([&] { ds.repeat(0); }).find("repeat"), std::string::npos);
  EXPECT_NE(error_of([&] { ds.batch(0); }).find("batch_size"), std::string::npos);
  EXPECT_NE(error_of([] { data::Dataset().batch(2); }).find("undefined"), std::string::npos);
}

TEST(Pipeline, EarlyIteratorDestructionDoesNotHang) {
  data::set_prefetch_size(3);
  auto ds = numbers(2000).map({vision::Rescale(0.5)}, "x", 4).shuffle(100).batch(8);
  within(30, [&] {
    for (int trial = 0; trial < 20; ++trial) {
      auto it = ds.create_tuple_iterator();
      for (int k = 0; k < trial % 3; ++k) ASSERT_TRUE(it->next());
    }                                          // each iterator is dropped with work in flight
    auto unused = ds.create_tuple_iterator();  // never read
  });
  // The iterator keeps its pipeline alive when every handle is gone.
  std::unique_ptr<data::Iterator> it;
  { it = numbers(5).batch(2).create_tuple_iterator(); }
  int n = 0;
  while (it->next()) ++n;
  EXPECT_EQ(n, 3);
  data::set_prefetch_size(2);
}

TEST(Vision, RescaleHwc2chwNormalize) {
  Tensor img = Tensor::empty({2, 2, 3}, kUInt8);  // (H, W, C)
  for (int i = 0; i < 12; ++i) img.data<uint8_t>()[i] = uint8_t(i * 10);
  Tensor f = vision::Rescale(0.1, -1)(img);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(values<float>(f)[5], 4.f);
  Tensor chw = vision::HWC2CHW()(f);  // (C, H, W)
  EXPECT_EQ(chw.shape(), (Shape{3, 2, 2}));
  // chw[c][h][w] = hwc[h][w][c]
  EXPECT_FLOAT_EQ(values<float>(chw)[1 * 4 + 1 * 2 + 0], values<float>(f)[(1 * 2 + 0) * 3 + 1]);
  Tensor n = vision::Normalize({1, 2, 3}, {2, 4, 0.5})(chw);
  EXPECT_FLOAT_EQ(values<float>(n)[0], (values<float>(chw)[0] - 1) / 2);
  EXPECT_FLOAT_EQ(values<float>(n)[8 + 3], (values<float>(chw)[8 + 3] - 3) / 0.5f);
  EXPECT_NE(error_of([&] { vision::Normalize({0.5}, {0.5})(img); }).find("Rescale"),
            std::string::npos);
  EXPECT_NE(error_of([&] { vision::HWC2CHW()(Tensor::empty({4})); }).find("(H, W, C)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              vision::Normalize({1, 2}, {1, 1})(chw);
            }).find("3 channels"),
            std::string::npos);
}
