// The file sources on small files the tests write: CIFAR-10/100 binaries, ImageFolder (JPEG and
// PNG, extensions, class_indexing, decode), COCO detection JSON (crowd boxes, images without
// annotations), CSV (RFC 4180 quoting, defaults), and GeneratorDataset's three forms.
#include <gtest/gtest.h>

#include <set>

#include "data_util.h"
#include "spore/data/dataset.h"
#include "spore/data/vision.h"

using namespace spore;
using namespace spore::testing_data;

namespace {

// CIFAR record r: labels then planes R = r, G = pixel index % 256, B = 255 - r.
std::string cifar_records(int64_t first, int64_t count, int label_bytes) {
  std::string s;
  for (int64_t r = first; r < first + count; ++r) {
    if (label_bytes == 2) s += char(r % 20);  // coarse
    s += char(r % (label_bytes == 2 ? 100 : 10));
    s += std::string(1024, char(r));
    for (int i = 0; i < 1024; ++i) s += char(i % 256);
    s += std::string(1024, char(255 - r));
  }
  return s;
}

// An (h, w, 3) uint8 image whose pixel (y, x) is (y * 10 + seed, x * 10, seed).
Tensor test_image(int64_t h, int64_t w, int seed) {
  Tensor t = Tensor::empty({h, w, 3}, kUInt8);
  uint8_t* p = t.data<uint8_t>();
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      p[(y * w + x) * 3] = uint8_t(y * 10 + seed);
      p[(y * w + x) * 3 + 1] = uint8_t(x * 10);
      p[(y * w + x) * 3 + 2] = uint8_t(seed);
    }
  return t;
}

}  // namespace

TEST(Cifar10, ReadsRecordsAsHWC) {
  TempDir dir;
  for (int b = 1; b <= 5; ++b)
    write_file(dir / ("data_batch_" + std::to_string(b) + ".bin"),
               cifar_records((b - 1) * 2, 2, 1));
  write_file(dir / "test_batch.bin", cifar_records(100, 3, 1));
  auto train = data::Cifar10Dataset(dir.str(), "train");
  EXPECT_EQ(train.get_dataset_size(), 10);
  EXPECT_EQ(train.get_column_names(), (std::vector<std::string>{"image", "label"}));
  auto rows = all_rows(train);
  ASSERT_EQ(rows.size(), 10u);
  const Tensor& img = rows[7][0];
  EXPECT_EQ(img.shape(), (Shape{32, 32, 3}));
  const auto px = img.to_vector<int>();
  // pixel (h=1, w=2): R = 7, G = (1 * 32 + 2) % 256, B = 248
  EXPECT_EQ(px[(1 * 32 + 2) * 3 + 0], 7);
  EXPECT_EQ(px[(1 * 32 + 2) * 3 + 1], 34);
  EXPECT_EQ(px[(1 * 32 + 2) * 3 + 2], 248);
  EXPECT_EQ(rows[7][1].item<int>(), 7);
  EXPECT_EQ(data::Cifar10Dataset(dir.str(), "test").get_dataset_size(), 3);
  EXPECT_EQ(data::Cifar10Dataset(dir.str(), "all").get_dataset_size(), 13);
  EXPECT_EQ(ints(data::Cifar10Dataset(dir.str(), "test")), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Cifar10, MalformedAndMissingFiles) {
  TempDir dir;
  for (int b = 1; b <= 5; ++b)
    write_file(dir / ("data_batch_" + std::to_string(b) + ".bin"), cifar_records(0, 2, 1));
  write_file(dir / "data_batch_3.bin", cifar_records(0, 2, 1) + "xyz");
  const std::string msg = error_of([&] { data::Cifar10Dataset(dir.str(), "train"); });
  EXPECT_NE(msg.find("data_batch_3.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("6149"), std::string::npos) << msg;  // the actual size
  EXPECT_NE(msg.find("3073-byte records"), std::string::npos) << msg;
  const std::string missing = error_of([&] { data::Cifar10Dataset(dir.str(), "test"); });
  EXPECT_NE(missing.find("test_batch.bin"), std::string::npos) << missing;
  EXPECT_NE(error_of([&] { data::Cifar10Dataset(dir.str(), "val"); }).find("usage"),
            std::string::npos);
  // A label past CIFAR-10's 10 classes (a CIFAR-100 file, or not CIFAR): named, not loaded.
  std::string bad = cifar_records(0, 2, 1);
  bad[3073] = char(10);
  write_file(dir / "test_batch.bin", bad);
  const std::string label = error_of([&] { data::Cifar10Dataset(dir.str(), "test"); });
  EXPECT_NE(label.find("test_batch.bin: record 1 has label 10; expected 0..9"), std::string::npos)
      << label;
}

TEST(Cifar100, FineAndCoarseLabels) {
  TempDir dir;
  write_file(dir / "train.bin", cifar_records(0, 30, 2));
  write_file(dir / "test.bin", cifar_records(0, 1, 2));
  auto ds = data::Cifar100Dataset(dir.str(), "train");
  EXPECT_EQ(ds.get_column_names(),
            (std::vector<std::string>{"image", "fine_label", "coarse_label"}));
  auto rows = all_rows(ds);
  ASSERT_EQ(rows.size(), 30u);
  EXPECT_EQ(rows[25][1].item<int>(), 25);
  EXPECT_EQ(rows[25][2].item<int>(), 5);
  EXPECT_EQ(rows[25][0].to_vector<int>()[0], 25);
  write_file(dir / "test.bin", cifar_records(0, 1, 2).substr(0, 3000));
  const std::string msg = error_of([&] { data::Cifar100Dataset(dir.str(), "test"); });
  EXPECT_NE(msg.find("3074-byte records"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3000"), std::string::npos) << msg;
  std::string fine = cifar_records(0, 1, 2);
  fine[1] = char(150);  // fine labels are 0..99
  write_file(dir / "test.bin", fine);
  const std::string label = error_of([&] { data::Cifar100Dataset(dir.str(), "test"); });
  EXPECT_NE(label.find("test.bin: record 0 has fine_label 150; expected 0..99"), std::string::npos)
      << label;
}

TEST(ImageFolder, ClassesFilesDecodeAndIndexing) {
  TempDir dir;
  const Tensor a = test_image(6, 5, 1), b = test_image(4, 7, 2), c = test_image(5, 5, 3);
  const Tensor a_png = vision::encode_image(a, ".png"), b_jpg = vision::encode_image(b, ".jpg");
  write_file(dir / "cat/a.png", a_png);
  write_file(dir / "cat/b.JPG", b_jpg);
  write_file(dir / "dog/c.png", vision::encode_image(c, ".png"));
  write_file(dir / "dog/notes.txt", std::string("not an image"));
  write_file(dir / "dog/.hidden.png", std::string("junk"));
  const std::vector<std::string> exts = {".png", ".jpg"};

  auto raw = data::ImageFolderDataset(dir.str(), {.extensions = exts});
  EXPECT_EQ(raw.get_dataset_size(), 3);
  auto rows = all_rows(raw);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][0].dim(), 1);  // raw bytes
  EXPECT_EQ(rows[0][0].to_vector<int>(), a_png.to_vector<int>());
  EXPECT_EQ(ints(raw), (std::vector<int64_t>{0, 0, 1}));

  for (int workers : {1, 3}) {
    auto dec = data::ImageFolderDataset(
        dir.str(), {.extensions = exts, .decode = true, .num_parallel_workers = workers});
    auto d = all_rows(dec);
    ASSERT_EQ(d.size(), 3u);
    EXPECT_EQ(d[0][0].shape(), (Shape{6, 5, 3}));
    EXPECT_EQ(d[0][0].to_vector<int>(), a.to_vector<int>());  // PNG is lossless
    EXPECT_EQ(d[1][0].shape(), (Shape{4, 7, 3}));
    EXPECT_EQ(d[2][0].to_vector<int>(), c.to_vector<int>());
  }
  // class_indexing picks and labels the folders.
  auto idx = data::ImageFolderDataset(
      dir.str(), {.extensions = exts, .class_indexing = {{"dog", 0}, {"cat", 5}}});
  std::multiset<int64_t> labels;
  for (int64_t v : ints(idx)) labels.insert(v);
  EXPECT_EQ(labels, (std::multiset<int64_t>{5, 5, 0}));
  EXPECT_NE(error_of([&] {
              data::ImageFolderDataset(dir.str(), {.class_indexing = {{"bird", 0}}});
            }).find("bird"),
            std::string::npos);
  // No extension filter: every non-hidden file (the .txt then fails to decode, by name).
  EXPECT_EQ(data::ImageFolderDataset(dir.str()).get_dataset_size(), 4);
  EXPECT_NE(error_of([&] { data::ImageFolderDataset(dir / "nope"); }).find("not a directory"),
            std::string::npos);
}

TEST(Coco, DetectionColumnsCrowdAndEmptyImages) {
  TempDir dir;
  write_file(dir / "img/1.jpg", vision::encode_image(test_image(8, 10, 1), ".jpg"));
  write_file(dir / "img/2.png", vision::encode_image(test_image(6, 6, 2), ".png"));
  write_file(dir / "img/3.jpg", vision::encode_image(test_image(9, 9, 3), ".jpg"));
  write_file(dir / "ann.json", std::string(R"({
    "info": {"year": 2017}, "licenses": [],
    "images": [{"id": 10, "file_name": "1.jpg", "width": 10, "height": 8},
               {"id": 20, "file_name": "2.png", "width": 6, "height": 6},
               {"file_name": "3.jpg", "id": 30, "width": 9, "height": 9}],
    "annotations": [
      {"id": 1, "image_id": 10, "category_id": 3, "bbox": [1, 2, 3.5, 4], "area": 14, "iscrowd": 0,
       "segmentation": [[1, 2, 3, 4, 5, 6]]},
      {"id": 2, "image_id": 30, "category_id": 90, "bbox": [0, 0, 9, 9], "iscrowd": 1,
       "segmentation": {"counts": [1, 2, 3], "size": [9, 9]}},
      {"id": 3, "image_id": 10, "category_id": 1, "bbox": [5.25, 0.5, 2, 2], "iscrowd": 1}],
    "categories": [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}, {"id": 90, "name": "x"}]
  })"));
  for (bool decode : {false, true}) {
    auto ds = data::CocoDataset(dir / "img", dir / "ann.json", {.decode = decode});
    EXPECT_EQ(ds.get_column_names(),
              (std::vector<std::string>{"image", "bbox", "category_id", "iscrowd"}));
    auto rows = all_rows(ds);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0][0].dim(), decode ? 3 : 1);
    if (decode) EXPECT_EQ(rows[0][0].shape(), (Shape{8, 10, 3}));
    EXPECT_EQ(rows[0][1].shape(), (Shape{2, 4}));
    EXPECT_EQ(rows[0][1].dtype(), kFloat32);
    EXPECT_EQ(rows[0][1].to_vector<float>(), (std::vector<float>{1, 2, 3.5, 4, 5.25, 0.5, 2, 2}));
    EXPECT_EQ(rows[0][2].shape(), (Shape{2, 1}));
    EXPECT_EQ(rows[0][2].to_vector<int>(), (std::vector<int>{3, 1}));
    EXPECT_EQ(rows[0][3].to_vector<int>(), (std::vector<int>{0, 1}));
    EXPECT_EQ(rows[1][1].shape(), (Shape{0, 4}));  // no annotations: kept, K = 0
    EXPECT_EQ(rows[1][3].shape(), (Shape{0, 1}));
    EXPECT_EQ(rows[2][2].to_vector<int>(), (std::vector<int>{90}));
    EXPECT_EQ(rows[2][3].to_vector<int>(), (std::vector<int>{1}));
  }
  EXPECT_NE(error_of([&] {
              data::CocoDataset(dir / "img", dir / "ann.json", {.task = "Keypoint"});
            }).find("Detection"),
            std::string::npos);
}

TEST(Coco, MalformedAnnotationsNameFileEntryAndField) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "img");
  auto err = [&](const std::string& json) {
    write_file(dir / "bad.json", json);
    return error_of([&] { data::CocoDataset(dir / "img", dir / "bad.json"); });
  };
  const std::string head = R"({"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [)";
  std::string m = err(head + R"({"id": 5, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]},
                                {"id": 7, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3]}]})");
  EXPECT_NE(m.find("bad.json"), std::string::npos) << m;
  EXPECT_NE(m.find("\"annotations\" entry 1 (id 7)"), std::string::npos) << m;
  EXPECT_NE(m.find("\"bbox\""), std::string::npos) << m;
  m = err(head + R"({"id": 5, "image_id": 99, "category_id": 1, "bbox": [1, 2, 3, 4]}]})");
  EXPECT_NE(m.find("image id 99"), std::string::npos) << m;
  m = err(head + R"({"id": 5, "image_id": 1, "bbox": [1, 2, 3, 4]}]})");
  EXPECT_NE(m.find("category_id"), std::string::npos) << m;
  m = err(head +
          R"({"id": 5, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "iscrowd": 2}]})");
  EXPECT_NE(m.find("iscrowd"), std::string::npos) << m;
  m = err(head + R"({"id": 5, "image_id": "one", "category_id": 1, "bbox": [1, 2, 3, 4]}]})");
  EXPECT_NE(m.find("image_id"), std::string::npos) << m;
  m = err(head + R"({"id": 5, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]})");  // cut
  EXPECT_NE(m.find("bad.json"), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  EXPECT_EQ(m.find("not a JSON object"), std::string::npos) << m;  // it is one, cut short
  m = err(R"({"annotations": []})");
  EXPECT_NE(m.find("\"images\""), std::string::npos) << m;
  m = err(R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 1, "file_name": "b.jpg"}]})");
  EXPECT_NE(m.find("duplicate image id"), std::string::npos) << m;
  m = error_of([&] { data::CocoDataset(dir / "img", dir / "none.json"); });
  EXPECT_NE(m.find("none.json"), std::string::npos) << m;
}

TEST(CSV, QuotingDefaultsAndTypes) {
  TempDir dir;
  write_file(dir / "a.csv", std::string("id,score,name\r\n"
                                        "1,0.5,plain\r\n"
                                        "2,,\"with, comma\"\n"
                                        ",2.5,\"say \"\"hi\"\"\"\n"
                                        "4,1e3,\"two\nlines\"\n"
                                        "\n"));
  write_file(dir / "b.csv", std::string("id,score,name\n5,-1,\n"));
  auto ds = data::CSVDataset({dir / "a.csv", dir / "b.csv"},
                             {.column_defaults = {int64_t(-7), 9.0, std::string("none")}});
  EXPECT_EQ(ds.get_column_names(), (std::vector<std::string>{"id", "score", "name"}));
  auto rows = all_rows(ds);
  ASSERT_EQ(rows.size(), 5u);
  auto text = [](const Tensor& t) {
    std::string s;
    for (int v : t.to_vector<int>()) s += char(v);
    return s;
  };
  EXPECT_EQ(rows[0][0].dtype(), kInt32);
  EXPECT_EQ(rows[0][1].dtype(), kFloat32);
  EXPECT_EQ(rows[1][1].item<float>(), 9.f);  // empty -> default
  EXPECT_EQ(text(rows[1][2]), "with, comma");
  EXPECT_EQ(rows[2][0].item<int>(), -7);
  EXPECT_EQ(text(rows[2][2]), "say \"hi\"");
  EXPECT_EQ(text(rows[3][2]), "two\nlines");
  EXPECT_EQ(rows[3][1].item<float>(), 1000.f);
  EXPECT_EQ(text(rows[4][2]), "none");
  // Explicit names (no header), another delimiter, all-text columns.
  write_file(dir / "c.csv", std::string("x;y\n\"a;b\";c\n"));
  auto c =
      all_rows(data::CSVDataset({dir / "c.csv"}, {.column_names = {"p", "q"}, .field_delim = ';'}));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(text(c[1][0]), "a;b");
  // Errors name the file and the line.
  write_file(dir / "bad.csv", std::string("a,b\n1,2\n3\n"));
  std::string m = error_of([&] { data::CSVDataset({dir / "bad.csv"}); });
  EXPECT_NE(m.find("bad.csv:3"), std::string::npos) << m;
  write_file(dir / "bad2.csv", std::string("a,b\n1,x\n"));
  m = error_of([&] {
    data::CSVDataset({dir / "bad2.csv"}, {.column_defaults = {int64_t(0), 0.0}});
  });
  EXPECT_NE(m.find("bad2.csv:2, column \"b\""), std::string::npos) << m;
  write_file(dir / "bad3.csv", std::string("a,b\n\"open,1\n"));
  m = error_of([&] { data::CSVDataset({dir / "bad3.csv"}); });
  EXPECT_NE(m.find("not closed"), std::string::npos) << m;
  write_file(dir / "bad4.csv", std::string("a,b\n1,x\"y\n"));
  m = error_of([&] { data::CSVDataset({dir / "bad4.csv"}); });
  EXPECT_NE(m.find("bad4.csv:2: a quote inside an unquoted field; a field with quotes must be"),
            std::string::npos)
      << m;
  m = error_of([&] { data::CSVDataset({dir / "bad.csv"}, {.column_defaults = {int64_t(0)}}); });
  EXPECT_NE(m.find("1 column_defaults for 2 columns [\"a\", \"b\"]; expected one default per"),
            std::string::npos)
      << m;
}

TEST(Generator, RandomAccessObjectAndIterable) {
  auto row_of = [](int64_t i) { return data::Row{scalar_i32(int32_t(i * i))}; };
  auto fn = data::GeneratorDataset(std::function<data::Row(int64_t)>(row_of), 6, {"sq"});
  EXPECT_EQ(fn.get_dataset_size(), 6);
  EXPECT_EQ(ints(fn, 0), (std::vector<int64_t>{0, 1, 4, 9, 16, 25}));
  // Thread-safe callables may run on workers; the order stays.
  auto par = data::GeneratorDataset(std::function<data::Row(int64_t)>(row_of), 50, {"sq"},
                                    {.num_parallel_workers = 4});
  std::vector<int64_t> expect;
  for (int64_t i = 0; i < 50; ++i) expect.push_back(i * i);
  EXPECT_EQ(ints(par, 0), expect);

  struct Source {
    int64_t size() const { return 4; }
    data::Row operator[](int64_t i) const { return {scalar_i32(int32_t(10 + i)), scalar_i32(1)}; }
  };
  auto obj = data::GeneratorDataset(Source{}, {"a", "b"}, {.shuffle = true});
  auto got = ints(obj, 0);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{10, 11, 12, 13}));

  auto make = [] {
    auto k = std::make_shared<int>(0);
    return std::function<std::optional<data::Row>()>([k]() -> std::optional<data::Row> {
      if (*k >= 3) return std::nullopt;
      return data::Row{scalar_i32((*k)++)};
    });
  };
  auto iter = data::GeneratorDataset(
      std::function<std::function<std::optional<data::Row>()>()>(make), {"k"});
  EXPECT_EQ(iter.get_dataset_size(), 3);
  EXPECT_EQ(ints(iter, 0), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(ints(iter.batch(2), 0), (std::vector<int64_t>{0, 1, 2}));

  // A row with the wrong number of columns names the source and the sample.
  auto bad = data::GeneratorDataset(std::function<data::Row(int64_t)>(row_of), 3, {"a", "b"});
  const std::string m = error_of([&] { all_rows(bad); });
  EXPECT_NE(m.find("[GeneratorDataset] sample 0"), std::string::npos) << m;
  EXPECT_NE(m.find("returned 1 columns"), std::string::npos) << m;
}
