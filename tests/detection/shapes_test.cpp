// make_shapes_dataset: the files are a valid COCO set (CocoDataset and metrics::Coco read them),
// boxes lie inside their images, every area range and crowd boxes occur, and a seed gives the same
// set whatever the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "spore/data/dataset.h"
#include "spore/detection/shapes.h"
#include "spore/metrics/coco_eval.h"
#include "test_util.h"

namespace spore {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& tag) {
  const fs::path p =
      fs::temp_directory_path() / ("spore_shapes_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Shapes, WritesAValidCocoSet) {
  const std::string dir = temp_dir("a");
  const auto sum = detection::make_shapes_dataset(
      dir, {.train = 60, .val = 12, .size = 256, .seed = 3, .crowd_prob = 0.3});
  EXPECT_EQ(sum.images, 72);
  EXPECT_GT(sum.crowd, 3);
  EXPECT_GT(sum.small, 10);
  EXPECT_GT(sum.medium, 10);
  EXPECT_GT(sum.large, 0);
  const auto gt = metrics::Coco::load(dir + "/annotations/instances_train2017.json");
  EXPECT_EQ(gt.images().size(), 60u);
  EXPECT_EQ(gt.categories().size(), 8u);
  EXPECT_EQ(gt.categories()[0].name, "circle");
  for (const auto& a : gt.annotations()) {
    const auto& img = gt.images()[size_t(a.image_id - 1)];
    EXPECT_GE(a.bbox[0], 0);
    EXPECT_GE(a.bbox[1], 0);
    EXPECT_LE(a.bbox[0] + a.bbox[2], double(img.width));
    EXPECT_LE(a.bbox[1] + a.bbox[3], double(img.height));
    EXPECT_GT(a.area, 0);
    EXPECT_LE(a.area, a.bbox[2] * a.bbox[3]);
    EXPECT_GE(a.category_id, 1);
    EXPECT_LE(a.category_id, 8);
  }
  // The data engine reads it: images decode at the annotated sizes, boxes come through.
  auto ds = data::CocoDataset(dir + "/val2017", dir + "/annotations/instances_val2017.json",
                              {.decode = true});
  EXPECT_EQ(ds.get_dataset_size(), 12);
  const auto val = metrics::Coco::load(dir + "/annotations/instances_val2017.json");
  int64_t i = 0, boxes = 0;
  auto it = ds.create_tuple_iterator();
  while (auto r = it->next()) {
    const data::Row& row = *r;
    EXPECT_EQ(row[0].size(0), val.images()[size_t(i)].height);
    EXPECT_EQ(row[0].size(1), val.images()[size_t(i)].width);
    EXPECT_EQ(row[0].size(2), 3);
    boxes += row[1].size(0);
    ++i;
  }
  EXPECT_EQ(boxes, int64_t(val.annotations().size()));
  fs::remove_all(dir);
}

TEST(Shapes, SameSeedSameSetAnyThreadCount) {
  const std::string a = temp_dir("b1"), b = temp_dir("b2"), c = temp_dir("b3");
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  detection::make_shapes_dataset(a, {.train = 10, .val = 0, .size = 96, .seed = 9});
  omp_set_num_threads(std::max(2, threads));
  detection::make_shapes_dataset(b, {.train = 10, .val = 0, .size = 96, .seed = 9});
  detection::make_shapes_dataset(c, {.train = 10, .val = 0, .size = 96, .seed = 10});
  omp_set_num_threads(threads);
  const std::string ja = slurp(a + "/annotations/instances_train2017.json");
  EXPECT_EQ(ja, slurp(b + "/annotations/instances_train2017.json"));
  EXPECT_NE(ja, slurp(c + "/annotations/instances_train2017.json"));
  EXPECT_EQ(slurp(a + "/train2017/000000000007.jpg"), slurp(b + "/train2017/000000000007.jpg"));
  EXPECT_FALSE(fs::exists(a + "/annotations/instances_val2017.json"));
  for (const auto& d : {a, b, c}) fs::remove_all(d);
}

TEST(Shapes, BadOptionsAreErrors) {
  EXPECT_NE(test::error_of([] {
              detection::make_shapes_dataset("/tmp/x", {.train = 0, .val = 0});
            }).find("at least one in all"),
            std::string::npos);
  EXPECT_NE(test::error_of([] {
              detection::make_shapes_dataset("/tmp/x", {.size = 10});
            }).find("image size in [64, 4096], got 10"),
            std::string::npos);
  EXPECT_NE(test::error_of([] {
              detection::make_shapes_dataset("/proc/spore_no/x", {.train = 1, .val = 0});
            }).find("cannot create"),
            std::string::npos);
}

}  // namespace
}  // namespace spore
