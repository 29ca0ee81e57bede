// Bad samples: a corrupt JPEG, a truncated JPEG and PNG, a file deleted after the listing, and a
// failing transform stop the pipeline by default with an error naming the source, the sample
// and the file; with ErrorPolicy::Skip they are dropped and counted, the rest flows on.
#include <gtest/gtest.h>

#include "data_util.h"
#include "spore/data/dataset.h"
#include "spore/data/vision.h"

using namespace spore;
using namespace spore::testing_data;

namespace {

Tensor gradient_image(int64_t h, int64_t w) {
  Tensor t = Tensor::empty({h, w, 3}, kUInt8);
  for (int64_t k = 0; k < h * w * 3; ++k) t.data<uint8_t>()[k] = uint8_t(k * 7 % 251);
  return t;
}

std::string bytes_of(const Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

// A folder cls/ with good images 0, 2, 4 and bad ones: 1 corrupt, 3 truncated JPEG,
// 5 truncated PNG, 6 deleted after listing (returned dataset is built before the delete).
struct BadFolder {
  TempDir dir;
  std::string good_jpg, good_png;
  BadFolder() {
    good_jpg = bytes_of(vision::encode_image(gradient_image(32, 40), ".jpg"));
    good_png = bytes_of(vision::encode_image(gradient_image(16, 16), ".png"));
    write_file(dir / "cls/0.jpg", good_jpg);
    write_file(dir / "cls/1.jpg", std::string("\xff\xd8\xff this is not a jpeg at all", 30));
    write_file(dir / "cls/2.png", good_png);
    write_file(dir / "cls/3.jpg", good_jpg.substr(0, good_jpg.size() / 2));
    write_file(dir / "cls/4.jpg", good_jpg);
    write_file(dir / "cls/5.png", good_png.substr(0, good_png.size() - 30));
    write_file(dir / "cls/6.jpg", good_jpg);
  }
};

struct PolicyGuard {
  explicit PolicyGuard(data::ErrorPolicy p) {
    data::set_error_policy(p);
    data::reset_skipped_count();
  }
  ~PolicyGuard() { data::set_error_policy(data::ErrorPolicy::Raise); }
};

}  // namespace

TEST(BadData, RaiseNamesSourceSampleFileAndReason) {
  BadFolder f;
  auto ds = data::ImageFolderDataset(f.dir.str(), {.decode = true, .num_parallel_workers = 3});
  std::filesystem::remove(f.dir / "cls/6.jpg");
  auto it = ds.create_tuple_iterator();
  ASSERT_TRUE(it->next());
  std::string m = error_of([&] { it->next(); });
  EXPECT_NE(m.find("[ImageFolderDataset] sample 1 ("), std::string::npos) << m;
  EXPECT_NE(m.find("cls/1.jpg"), std::string::npos) << m;
  EXPECT_FALSE(it->next());
  // Each bad file alone (after a good one), through map + batch with prefetch.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"corrupt.jpg", "\xff\xd8\xff this is not a jpeg"},
      {"half.jpg", f.good_jpg.substr(0, f.good_jpg.size() / 2)},
      {"cut.png", f.good_png.substr(0, f.good_png.size() - 30)},
      {"gone.jpg", f.good_jpg}};
  for (const auto& [name, bytes] : cases) {
    TempDir d;
    write_file(d / "c/a.jpg", f.good_jpg);
    write_file(d / ("c/" + name), bytes);
    auto one = data::ImageFolderDataset(d.str(), {.decode = true})
                   .map({[](const Tensor& t) { return t; }}, "image", 2)
                   .batch(1);
    if (name == "gone.jpg") std::filesystem::remove(d / ("c/" + name));
    auto it2 = one.create_tuple_iterator();
    ASSERT_TRUE(it2->next()) << name;
    const std::string msg = error_of([&] { it2->next(); });
    EXPECT_NE(msg.find("[ImageFolderDataset] sample 1 (" + d / ("c/" + name) + "): "),
              std::string::npos)
        << name << ": " << msg;
    if (name == "gone.jpg") EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
  }
}

TEST(BadData, SkipDropsCountsAndKeepsTheRest) {
  BadFolder f;
  PolicyGuard guard(data::ErrorPolicy::Skip);
  for (int workers : {1, 4}) {
    data::reset_skipped_count();
    auto ds =
        data::ImageFolderDataset(f.dir.str(), {.decode = true, .num_parallel_workers = workers});
    std::filesystem::remove(f.dir / "cls/6.jpg");
    auto rows = all_rows(ds);
    EXPECT_EQ(rows.size(), 3u) << workers;
    EXPECT_EQ(data::get_skipped_count(), 4) << workers;
    for (auto& r : rows) EXPECT_EQ(r[0].dim(), 3);
    write_file(f.dir / "cls/6.jpg", f.good_jpg);
  }
  // Decoding in a map (decode = false) is covered the same way, and batches still form.
  data::reset_skipped_count();
  auto mapped = data::ImageFolderDataset(f.dir.str())
                    .map({vision::Decode(), vision::Resize({8, 8})}, "image", 3)
                    .batch(2);
  auto batches = all_rows(mapped);
  EXPECT_EQ(data::get_skipped_count(), 3);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0][0].shape(), (Shape{2, 8, 8, 3}));
  EXPECT_EQ(batches[1][0].shape(), (Shape{2, 8, 8, 3}));
}

TEST(BadData, CocoMissingImageFile) {
  TempDir dir;
  write_file(dir / "img/a.jpg", vision::encode_image(gradient_image(8, 8), ".jpg"));
  write_file(
      dir / "ann.json",
      std::string(
          R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "gone.jpg"}],
                            "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [0, 0, 1, 1]}]})"));
  auto ds = data::CocoDataset(dir / "img", dir / "ann.json", {.decode = true});
  const std::string m = error_of([&] { all_rows(ds); });
  EXPECT_NE(m.find("[CocoDataset] sample 1 ("), std::string::npos) << m;
  EXPECT_NE(m.find("gone.jpg, image id 2"), std::string::npos) << m;
  PolicyGuard guard(data::ErrorPolicy::Skip);
  EXPECT_EQ(all_rows(ds).size(), 1u);
  EXPECT_EQ(data::get_skipped_count(), 1);
}
