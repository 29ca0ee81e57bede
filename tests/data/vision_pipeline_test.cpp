// The vision transforms inside Dataset pipelines: random transforms give the same rows whatever
// the number of map workers, detection RowOps run on {image, bbox} columns, MixUp after batch(),
// and a corrupt JPEG stops the pipeline with an error that says what is wrong.
#include <gtest/gtest.h>

#include "tests/data/vision_util.h"

using namespace spore;

namespace {

// n images (n, 24, 32, 3) uint8, each different.
data::Dataset images(int64_t n) {
  Tensor img = Tensor::empty({n, 24, 32, 3}, kUInt8);
  for (int64_t i = 0; i < img.numel(); ++i) img.data<uint8_t>()[i] = uint8_t((i * 7919) % 251);
  Tensor label = Tensor::empty({n}, kInt32);
  for (int64_t i = 0; i < n; ++i) label.data<int32_t>()[i] = int32_t(i % 5);
  return data::TensorDataset({img, label}, {"image", "label"});
}

std::vector<Tensor> column(const data::Dataset& ds, size_t c = 0) {
  std::vector<Tensor> out;
  auto it = ds.create_tuple_iterator();
  while (auto row = it->next()) out.push_back((*row)[c].contiguous());
  return out;
}

}  // namespace

TEST(VisionPipeline, RandomTransformsAreDeterministicAcrossWorkerCounts) {
  auto pipeline = [](int workers) {
    return images(24).map(
        {vision::RandomResizedCrop({16, 16}), vision::RandomHorizontalFlip(),
         vision::RandomColorAdjust({0.3}, {0.3}, {0.3}, {0.05}), vision::CutOut(4, 2),
         vision::Normalize({127, 127, 127}, {60, 60, 60}, true), vision::HWC2CHW()},
        "image", workers);
  };
  const std::vector<Tensor> one = column(pipeline(1)), three = column(pipeline(3));
  ASSERT_EQ(one.size(), 24u);
  ASSERT_EQ(three.size(), 24u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].shape(), (Shape{3, 16, 16}));
    EXPECT_TRUE(vt::same(one[i], three[i])) << "row " << i;
  }
  EXPECT_FALSE(vt::same(one[0], one[1]));
}

TEST(VisionPipeline, DetectionRowOpsOnImageAndBoxColumns) {
  const int64_t n = 6;
  Tensor boxes = Tensor::empty({n, 2, 4}, kFloat32);
  for (int64_t i = 0; i < n * 8; ++i) boxes.data<float>()[i] = float(2 + (i % 4) * 3);
  Tensor img = Tensor::empty({n, 24, 32, 3}, kUInt8);
  std::memset(img.data_ptr(), 0, img.nbytes());
  data::Dataset ds = data::TensorDataset({img, boxes}, {"image", "bbox"});
  auto run = [&](int workers) {
    return ds.map({vision::Letterbox({64, 64}), vision::RandomHorizontalFlipWithBBox(),
                   vision::RandomAffineWithBBox({.degrees = 5})},
                  {"image", "bbox"}, {}, workers);
  };
  const std::vector<Tensor> a = column(run(1), 1), b = column(run(2), 1);
  ASSERT_EQ(a.size(), size_t(n));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(vt::same(a[i], b[i]));
  EXPECT_EQ(column(run(1), 0)[0].shape(), (Shape{64, 64, 3}));
}

TEST(VisionPipeline, MixUpAfterBatch) {
  auto ds = images(8)
                .map({vision::OneHot(5)}, "label")
                .batch(4)
                .map({vision::MixUp(0.4)}, {"image", "label"});
  auto it = ds.create_tuple_iterator();
  int batches = 0;
  while (auto row = it->next()) {
    ++batches;
    EXPECT_EQ((*row)[0].shape(), (Shape{4, 24, 32, 3}));
    EXPECT_EQ((*row)[0].dtype(), kFloat32);
    const std::vector<float> lab = vt::values<float>((*row)[1].contiguous());
    for (int i = 0; i < 4; ++i) {
      float s = 0;
      for (int k = 0; k < 5; ++k) s += lab[size_t(i * 5 + k)];
      EXPECT_NEAR(s, 1, 1e-5);
    }
  }
  EXPECT_EQ(batches, 2);
}

TEST(VisionPipeline, CorruptJpegStopsThePipelineWithTheReason) {
  const Tensor good = vision::encode_image(vt::index_image(8, 8, 3), ".jpg");
  const int64_t n = good.numel();
  Tensor bytes = Tensor::empty({3, n}, kUInt8);
  for (int r = 0; r < 3; ++r)
    std::memcpy(bytes.data<uint8_t>() + r * n, good.data_ptr(), size_t(n));
  // Row 1: the second half of the data zeroed (a truncated download padded with zeros).
  std::memset(bytes.data<uint8_t>() + n + n / 2, 0, size_t(n - n / 2));
  auto ds = data::TensorDataset({bytes}, {"image"}).map({vision::Decode()}, "image", 2);
  const std::string msg = vt::error_of([&] {
    auto it = ds.create_tuple_iterator();
    while (it->next()) {
    }
  });
  EXPECT_NE(msg.find("JPEG"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[vision.Decode]"), std::string::npos) << msg;
}
