// MnistDataset: IDX parsing (raw and gzipped), its error messages, sharding, sampling and
// shuffling; plus an end-to-end read of Debian's Fashion-MNIST when it is installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/idx_util.h"
#include "spore/context.h"
#include "spore/data/dataset.h"
#include "test_util.h"

using namespace spore;
using spore::testing::label_of;
using spore::testing::pixel;

namespace {

using ::spore::test::error_of;

std::vector<int32_t> labels(const data::Dataset& ds) {
  std::vector<int32_t> out;
  auto it = ds.create_tuple_iterator();
  while (auto row = it->next()) out.push_back((*row)[1].item<int32_t>());
  return out;
}

// Labels identify rows uniquely when the label column is set to the row index.
std::string dir_with_index_labels(int n) {
  const std::string dir = spore::testing::make_temp_dir();
  std::vector<uint8_t> lab;
  for (int i = 0; i < n; ++i) lab.push_back(uint8_t(i));
  spore::testing::write_bytes(
      dir + "/train-images-idx3-ubyte",
      spore::testing::idx_bytes(0x803, {uint32_t(n), 28, 28}, spore::testing::image_data(n)),
      false);
  spore::testing::write_bytes(dir + "/train-labels-idx1-ubyte",
                              spore::testing::idx_bytes(0x801, {uint32_t(n)}, lab), false);
  return dir;
}

}  // namespace

class MnistFormats : public ::testing::TestWithParam<bool> {};

TEST_P(MnistFormats, ReadsValuesAndShapes) {
  const bool gz = GetParam();
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 10, gz);
  auto ds = data::MnistDataset(dir, "train");
  EXPECT_EQ(ds.get_dataset_size(), 10);
  EXPECT_EQ(ds.get_column_names(), (std::vector<std::string>{"image", "label"}));
  auto it = ds.create_tuple_iterator();
  int i = 0;
  while (auto row = it->next()) {
    const Tensor& img = (*row)[0];
    const Tensor& lab = (*row)[1];
    ASSERT_EQ(img.shape(), (Shape{28, 28, 1}));
    ASSERT_EQ(img.dtype(), kUInt8);
    ASSERT_EQ(lab.dim(), 0);
    ASSERT_EQ(lab.dtype(), kInt32);
    EXPECT_EQ(lab.item<int32_t>(), label_of(i));
    const auto px = img.to_vector<uint8_t>();
    for (int p = 0; p < 784; p += 97) EXPECT_EQ(px[size_t(p)], pixel(i, p)) << "image " << i;
    ++i;
  }
  EXPECT_EQ(i, 10);
}
INSTANTIATE_TEST_SUITE_P(RawAndGzip, MnistFormats, ::testing::Values(false, true));

TEST(Mnist, UsageTestAndAll) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 6, true);
  spore::testing::write_mnist(dir, "t10k", 4, false, 100);
  EXPECT_EQ(data::MnistDataset(dir, "test").get_dataset_size(), 4);
  auto all = data::MnistDataset(dir, "all");
  EXPECT_EQ(all.get_dataset_size(), 10);
  auto labs = labels(all);
  ASSERT_EQ(labs.size(), 10u);
  EXPECT_EQ(labs[0], label_of(0));
  EXPECT_EQ(labs[6], label_of(100));  // test rows follow the train rows
  EXPECT_NE(error_of([&] { data::MnistDataset(dir, "valid"); }).find("usage"), std::string::npos);
}

TEST(Mnist, TruncatedFileNamesFileAndCounts) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 10, false);
  auto data = spore::testing::image_data(10);
  data.resize(7000);
  const std::string path = dir + "/train-images-idx3-ubyte";
  spore::testing::write_bytes(path, spore::testing::idx_bytes(0x803, {10, 28, 28}, data), false);
  const std::string msg = error_of([&] { data::MnistDataset(dir, "train"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("7840"), std::string::npos) << msg;
  EXPECT_NE(msg.find("7000"), std::string::npos) << msg;
}

TEST(Mnist, TruncatedGzipFile) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 3, true);
  auto data = spore::testing::image_data(3);
  data.resize(100);
  spore::testing::write_bytes(dir + "/train-images-idx3-ubyte.gz",
                              spore::testing::idx_bytes(0x803, {3, 28, 28}, data), true);
  const std::string msg = error_of([&] { data::MnistDataset(dir, "train"); });
  EXPECT_NE(msg.find("train-images-idx3-ubyte.gz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2352"), std::string::npos) << msg;
}

TEST(Mnist, TrailingDataIsAnError) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 2, false);
  auto lab = spore::testing::label_data(2);
  lab.push_back(7);
  spore::testing::write_bytes(dir + "/train-labels-idx1-ubyte",
                              spore::testing::idx_bytes(0x801, {2}, lab), false);
  const std::string msg = error_of([&] { data::MnistDataset(dir, "train"); });
  EXPECT_NE(msg.find("trailing"), std::string::npos) << msg;
}

TEST(Mnist, BadMagic) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 2, false);
  // A labels file where the images file should be.
  spore::testing::write_bytes(dir + "/train-images-idx3-ubyte",
                              spore::testing::idx_bytes(0x801, {2}, {1, 2}), false);
  const std::string msg = error_of([&] { data::MnistDataset(dir, "train"); });
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x00000801"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x00000803"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train-images-idx3-ubyte"), std::string::npos) << msg;
}

TEST(Mnist, CountMismatch) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 5, false);
  spore::testing::write_bytes(dir + "/train-labels-idx1-ubyte",
                              spore::testing::idx_bytes(0x801, {4}, spore::testing::label_data(4)),
                              false);
  const std::string msg = error_of([&] { data::MnistDataset(dir, "train"); });
  EXPECT_NE(msg.find("5 images"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 labels"), std::string::npos) << msg;
}

TEST(Mnist, MissingFileExplainsWhatIsExpected) {
  const std::string dir = spore::testing::make_temp_dir();
  try {
    data::MnistDataset(dir, "train");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::IOError);
    EXPECT_NE(msg.find(dir + "/train-images-idx3-ubyte"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train-labels-idx1-ubyte"), std::string::npos) << msg;
    EXPECT_NE(msg.find("t10k-images-idx3-ubyte"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  }
  const std::string msg2 = error_of([] { data::MnistDataset("/nonexistent/mnist", "test"); });
  EXPECT_NE(msg2.find("does not exist"), std::string::npos) << msg2;
}

TEST(Mnist, NumSamplesAndShards) {
  const std::string dir = dir_with_index_labels(10);
  EXPECT_EQ(data::MnistDataset(dir, "train", {.num_samples = 4}).get_dataset_size(), 4);
  EXPECT_EQ(labels(data::MnistDataset(dir, "train", {.num_samples = 3})),
            (std::vector<int32_t>{0, 1, 2}));
  for (bool contiguous : {false, true}) {
    for (bool shuffle : {false, true}) {
      std::set<int32_t> seen;
      for (int64_t s = 0; s < 3; ++s) {
        set_seed(7);
        auto ds = data::MnistDataset(
            dir, "train",
            {.shuffle = shuffle, .num_shards = 3, .shard_id = s, .shard_contiguous = contiguous});
        EXPECT_EQ(ds.get_dataset_size(), 3);  // equal shards; row 10's remainder dropped
        auto labs = labels(ds);
        ASSERT_EQ(labs.size(), 3u);
        for (int32_t l : labs) EXPECT_TRUE(seen.insert(l).second) << "row " << l << " twice";
      }
      EXPECT_EQ(seen.size(), 9u);
    }
  }
  EXPECT_EQ(labels(data::MnistDataset(dir, "train", {.num_shards = 3, .shard_id = 1})),
            (std::vector<int32_t>{1, 4, 7}));
  EXPECT_EQ(labels(data::MnistDataset(dir, "train",
                                      {.num_shards = 3, .shard_id = 1, .shard_contiguous = true})),
            (std::vector<int32_t>{3, 4, 5}));
  EXPECT_NE(error_of([&] {
              data::MnistDataset(dir, "train", {.num_shards = 2, .shard_id = 2});
            }).find("shard_id"),
            std::string::npos);
}

TEST(Mnist, ShuffleIsSeededAndChangesPerEpoch) {
  const std::string dir = dir_with_index_labels(50);
  set_seed(123);
  auto a = data::MnistDataset(dir, "train", {.shuffle = true});
  auto e0 = labels(a), e1 = labels(a);
  set_seed(123);
  auto b = data::MnistDataset(dir, "train", {.shuffle = true});
  EXPECT_EQ(labels(b), e0);  // same seed, same first epoch
  EXPECT_NE(e0, e1);         // reshuffled the next epoch
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[size_t(i)], i);  // a permutation
  std::vector<int32_t> identity(50);
  for (int i = 0; i < 50; ++i) identity[size_t(i)] = i;
  EXPECT_NE(e0, identity);
}

TEST(Mnist, MapAndBatchGiveNCHWFloat) {
  const std::string dir = spore::testing::make_temp_dir();
  spore::testing::write_mnist(dir, "train", 10, true);
  auto ds = data::MnistDataset(dir, "train")
                .map({vision::Rescale(1 / 255.0), vision::HWC2CHW()}, "image")
                .batch(4);
  EXPECT_EQ(ds.get_dataset_size(), 3);
  EXPECT_EQ(ds.get_batch_size(), 4);
  auto it = ds.create_tuple_iterator();
  auto row = it->next();
  ASSERT_TRUE(row);
  EXPECT_EQ((*row)[0].shape(), (Shape{4, 1, 28, 28}));
  EXPECT_EQ((*row)[0].dtype(), kFloat32);
  EXPECT_EQ((*row)[1].shape(), (Shape{4}));
  EXPECT_EQ((*row)[1].dtype(), kInt32);
  auto px = (*row)[0].to_vector<float>();
  EXPECT_FLOAT_EQ(px[784 * 2 + 5], float(pixel(2, 5) / 255.0));
}

// Debian's dataset-fashion-mnist, when installed.
TEST(Mnist, RealFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  struct stat st;
  if (::stat((dir + "/t10k-images-idx3-ubyte.gz").c_str(), &st) != 0 ||
      ::stat((dir + "/train-labels-idx1-ubyte.gz").c_str(), &st) != 0)
    GTEST_SKIP() << "Fashion-MNIST not installed (apt install dataset-fashion-mnist)";
  auto test = data::MnistDataset(dir, "test");
  EXPECT_EQ(test.get_dataset_size(), 10000);
  auto it = test.create_tuple_iterator();
  auto row = it->next();
  ASSERT_TRUE(row);
  EXPECT_EQ((*row)[0].shape(), (Shape{28, 28, 1}));
  EXPECT_EQ((*row)[1].item<int32_t>(), 9);  // Ankle boot
  auto train = data::MnistDataset(dir, "train", {.num_samples = 1});
  auto it2 = train.create_tuple_iterator();
  auto row2 = it2->next();
  ASSERT_TRUE(row2);
  EXPECT_EQ((*row2)[1].item<int32_t>(), 9);
  EXPECT_EQ(data::MnistDataset(dir, "train").get_dataset_size(), 60000);
}
