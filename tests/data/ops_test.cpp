// Pipeline ops beyond the basics of pipeline_test.cpp: multi-column map (RowOp, output columns),
// batch padding and per_batch_map, project / rename / zip / concat / split, the dict iterator,
// determinism of random transforms across worker counts, and prompt shutdown on early exit.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "data_util.h"
#include "spore/context.h"
#include "spore/data/dataset.h"
#include "spore/data/sample_rng.h"

using namespace spore;
using namespace spore::testing_data;

namespace {

Tensor i32(std::vector<int32_t> v, Shape shape) {
  Tensor t = Tensor::empty(shape, kInt32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

// A random transform written with sample_rng(): x + noise drawn per sample.
Tensor add_noise(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), kFloat32);
  const auto v = x.to_vector<float>();
  for (size_t k = 0; k < v.size(); ++k)
    y.data<float>()[k] = v[k] + float(data::sample_rng().uniform());
  return y;
}

}  // namespace

TEST(MapOps, RowOpMultiColumnAndOutputColumns) {
  auto ds = range_ds(5);
  // Two inputs -> three outputs, placed where "i" was.
  data::RowOp split3 = [](const data::Row& r) {
    Tensor s = Tensor::empty({}, kFloat32);
    *s.data<float>() = float(r[0].item<int>()) + r[1].item<float>();
    return data::Row{r[0], r[1], s};
  };
  auto m = ds.map({split3}, {"i", "x"}, {"a", "b", "sum"}, 2);
  EXPECT_EQ(m.get_column_names(), (std::vector<std::string>{"a", "b", "sum"}));
  auto rows = all_rows(m);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[3][2].item<float>(), 9.f);
  // A TensorOp after a RowOp that returns one column; output renamed; other columns kept.
  data::RowOp first = [](const data::Row& r) { return data::Row{r[0]}; };
  auto m2 = ds.map({first, [](const Tensor& t) { return scalar_i32(t.item<int>() * 3); }}, "x",
                   {"x3"}, 1);
  EXPECT_EQ(m2.get_column_names(), (std::vector<std::string>{"i", "x3"}));
  EXPECT_EQ(ints(m2, 1), (std::vector<int64_t>{0, 6, 12, 18, 24}));
  // Errors: a TensorOp given two columns; a wrong output count; duplicate names.
  auto two = ds.map({[](const Tensor& t) { return t; }}, {"i", "x"});
  EXPECT_NE(error_of([&] { all_rows(two); }).find("RowOp"), std::string::npos);
  auto wrong = ds.map({split3}, {"i", "x"});
  const std::string m3 = error_of([&] { all_rows(wrong); });
  EXPECT_NE(m3.find("return 3 columns"), std::string::npos) << m3;
  EXPECT_NE(m3.find("[TensorDataset] sample 0"), std::string::npos) << m3;
  EXPECT_NE(error_of([&] { ds.map({first}, "i", {"x"}); }).find("duplicate"), std::string::npos);
}

TEST(BatchOps, PaddingAndPerBatchMap) {
  // Rows of variable length k + 1 (values k).
  auto gen = data::GeneratorDataset(std::function<data::Row(int64_t)>([](int64_t k) {
                                      Tensor t = Tensor::empty({k + 1}, kInt32);
                                      for (int64_t j = 0; j <= k; ++j)
                                        t.data<int32_t>()[j] = int32_t(k);
                                      return data::Row{t, scalar_i32(int32_t(k))};
                                    }),
                                    5, {"seq", "k"});
  EXPECT_NE(error_of([&] { all_rows(gen.batch(2)); }).find("pad_info"), std::string::npos);
  auto padded = gen.batch(3, data::BatchOptions{.pad_info = {{"seq", {{}, -1}}}});
  auto rows = all_rows(padded);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].shape(), (Shape{3, 3}));
  EXPECT_EQ(rows[0][0].to_vector<int>(), (std::vector<int>{0, -1, -1, 1, 1, -1, 2, 2, 2}));
  EXPECT_EQ(rows[1][0].shape(), (Shape{2, 5}));
  auto fixed = all_rows(gen.batch(2, data::BatchOptions{.pad_info = {{"seq", {{6}, 0}}}}));
  EXPECT_EQ(fixed[0][0].shape(), (Shape{2, 6}));
  EXPECT_NE(error_of([&] {
              all_rows(gen.batch(5, data::BatchOptions{.pad_info = {{"seq", {{3}, 0}}}}));
            }).find("smaller"),
            std::string::npos);
  // per_batch_map sees the samples unstacked, with the batch number.
  std::vector<int64_t> seen;
  auto mapped = gen.batch(2, data::BatchOptions{.per_batch_map =
                                                    [&seen](std::vector<std::vector<Tensor>> cols,
                                                            const data::BatchInfo& info) {
                                                      seen.push_back(info.batch_num);
                                                      for (auto& t : cols[0])
                                                        t = scalar_i32(int32_t(t.numel() * 100));
                                                      return cols;
                                                    },
                                                .input_columns = {"seq"}});
  data::set_prefetch_size(0);
  EXPECT_EQ(ints(mapped, 0), (std::vector<int64_t>{100, 200, 300, 400, 500}));
  data::set_prefetch_size(16);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
}

TEST(CombineOps, ProjectRenameZipConcat) {
  auto ds = range_ds(4);
  auto p = ds.project({"x", "i"});
  EXPECT_EQ(p.get_column_names(), (std::vector<std::string>{"x", "i"}));
  EXPECT_EQ(ints(p, 1), (std::vector<int64_t>{0, 1, 2, 3}));
  auto r = ds.rename({"i"}, {"index"});
  EXPECT_EQ(r.get_column_names(), (std::vector<std::string>{"index", "x"}));
  EXPECT_NE(error_of([&] { ds.project({"nope"}); }).find("nope"), std::string::npos);
  EXPECT_NE(error_of([&] { ds.rename({"i"}, {"x"}); }).find("duplicate"), std::string::npos);

  EXPECT_NE(error_of([&] { ds.zip(range_ds(3)); }).find("duplicate"), std::string::npos);
  auto z2 = r.project({"index"}).zip(range_ds(3).project({"x"}));
  EXPECT_EQ(z2.get_dataset_size(), 3);
  EXPECT_EQ(ints(z2, 1), (std::vector<int64_t>{0, 2, 4}));

  auto c = ds + range_ds(2);
  EXPECT_EQ(c.get_dataset_size(), 6);
  EXPECT_EQ(ints(c, 0), (std::vector<int64_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_NE(error_of([&] { ds.concat(r); }).find("same columns"), std::string::npos);

  auto d = ds.create_dict_iterator();
  auto first = d->next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->size(), 2u);
  EXPECT_EQ(first->at("x").item<float>(), 0.f);
  EXPECT_EQ(ds.get_col_names(), ds.get_column_names());
}

TEST(CombineOps, Split) {
  set_seed(3);
  auto ds = range_ds(10);
  auto parts = ds.split({7, 3}, /*randomize=*/false);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(ints(parts[0], 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ints(parts[1], 0), (std::vector<int64_t>{7, 8, 9}));
  auto rnd = ds.split({0.5, 0.3, 0.2});
  ASSERT_EQ(rnd.size(), 3u);
  std::set<int64_t> all;
  int64_t total = 0;
  for (auto& p : rnd) {
    for (int64_t v : ints(p, 0)) all.insert(v);
    total += p.get_dataset_size();
    EXPECT_EQ(p.get_dataset_size(), int64_t(ints(p, 0).size()));
  }
  EXPECT_EQ(total, 10);
  EXPECT_EQ(all.size(), 10u);  // disjoint and covering
  EXPECT_NE(ints(rnd[0], 0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(error_of([&] { ds.split({5, 4}); }).find("sum to 9"), std::string::npos);
}

TEST(Determinism, RandomTransformSameForAnyWorkerCount) {
  set_seed(1234);
  auto run = [](int workers, int src_workers) {
    auto ds =
        data::GeneratorDataset(std::function<data::Row(int64_t)>([](int64_t i) {
                                 Tensor x = Tensor::empty({3}, kFloat32);
                                 for (int k = 0; k < 3; ++k) x.data<float>()[k] = float(i);
                                 return data::Row{x};
                               }),
                               64, {"x"}, {.shuffle = true, .num_parallel_workers = src_workers})
            .map({add_noise}, "x", workers)
            .shuffle(16)
            .batch(8);
    std::vector<std::vector<float>> epochs;
    for (int e = 0; e < 2; ++e) {
      std::vector<float> all;
      for (auto& r : all_rows(ds))
        for (float v : r[0].to_vector<float>()) all.push_back(v);
      epochs.push_back(all);
    }
    return epochs;
  };
  const auto one = run(1, 1);
  const auto four = run(4, 3);
  EXPECT_EQ(one, four);
  EXPECT_NE(one[0], one[1]);  // reshuffled and re-drawn in the next epoch
  set_seed(99);
  EXPECT_NE(run(2, 1), one);
}

TEST(Execution, EarlyExitJoinsPromptly) {
  std::atomic<int> produced{0};
  auto slow = data::GeneratorDataset(std::function<data::Row(int64_t)>([&](int64_t i) {
                                       ++produced;
                                       return data::Row{scalar_i32(int32_t(i))};
                                     }),
                                     100000, {"i"}, {.num_parallel_workers = 4})
                  .map({[](const Tensor& t) {
                         std::this_thread::sleep_for(std::chrono::microseconds(200));
                         return t;
                       }},
                       "i", 4)
                  .batch(4);
  within(20, [&] {
    for (int trial = 0; trial < 10; ++trial) {
      auto it = slow.create_tuple_iterator();
      for (int k = 0; k < 3; ++k) ASSERT_TRUE(it->next());
      const auto t0 = std::chrono::steady_clock::now();
      it.reset();  // work in flight in every stage
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(ms, 200) << "destroying the iterator took " << ms << " ms";
    }
  });
  // Back-pressure: the stages stop producing when nobody reads.
  produced = 0;
  auto it = slow.create_tuple_iterator();
  it->next();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(produced.load(), 200) << "the pipeline ran ahead without bound";
}

TEST(Execution, WorkerExceptionNamesSampleAndSource) {
  auto ds = range_ds(40).map({[](const Tensor& t) {
                               SPORE_CHECK(t.item<int>() != 17, "seventeen is unlucky");
                               return t;
                             }},
                             "i", 4);
  auto it = ds.create_tuple_iterator();
  for (int k = 0; k < 17; ++k) ASSERT_TRUE(it->next());
  const std::string m = error_of([&] { it->next(); });
  EXPECT_NE(m.find("[TensorDataset] sample 17: [Dataset.map] column \"i\", operation 0: seventeen"),
            std::string::npos)
      << m;
  EXPECT_FALSE(it->next());  // the pass ended
}
