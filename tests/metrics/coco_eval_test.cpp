// metrics::CocoEval: hand-checked cases, file reading errors, and the 12 numbers on the generated
// cases (coco_cases.h) against pycocotools to 1e-12: live when /usr/bin/python3 (or $SPORE_PYTHON)
// imports pycocotools, otherwise against the committed numbers pycocotools produced
// (fixtures/coco_eval_pycocotools.json). SPORE_UPDATE_FIXTURES=1 with pycocotools rewrites them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "metrics/coco_cases.h"
#include "spore/metrics/coco_eval.h"
#include "test_util.h"

namespace spore {
namespace {

namespace fs = std::filesystem;
using metrics::Coco;
using metrics::CocoDetection;
using metrics::CocoEval;

std::string temp_dir(const std::string& tag) {
  const fs::path p =
      fs::temp_directory_path() / ("spore_coco_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}
void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string python() {
  const char* env = std::getenv("SPORE_PYTHON");
  return env && *env ? env : SPORE_TEST_PYTHON;
}
bool has_pycocotools() {
  return std::system((python() + " -c 'import pycocotools.cocoeval' >/dev/null 2>&1").c_str()) == 0;
}

// One image 100x100 with categories 1 and 2; a single gt box of category 1.
Coco one_box_gt(std::array<double, 4> box, bool crowd = false) {
  Coco gt;
  gt.add_image({1, "a.jpg", 100, 100});
  gt.add_category({1, "a", ""});
  gt.add_category({2, "b", ""});
  gt.add_annotation({.id = 1,
                     .image_id = 1,
                     .category_id = 1,
                     .bbox = box,
                     .area = box[2] * box[3],
                     .iscrowd = crowd});
  return gt;
}

TEST(CocoEval, ThresholdsAreNumpysLinspace) {
  CocoEval ev(one_box_gt({0, 0, 10, 10}),
              one_box_gt({0, 0, 10, 10}).load_res(std::vector<CocoDetection>{}));
  ASSERT_EQ(ev.params.iou_thrs.size(), 10u);
  ASSERT_EQ(ev.params.rec_thrs.size(), 101u);
  // repr(numpy.linspace(.5, .95, 10)) and linspace(0, 1, 101) entries, bit for bit.
  EXPECT_EQ(ev.params.iou_thrs[0], 0.5);
  EXPECT_EQ(ev.params.iou_thrs[1], 0.55);
  EXPECT_EQ(ev.params.iou_thrs[2], 0.6);
  EXPECT_EQ(ev.params.iou_thrs[5], 0.75);
  EXPECT_EQ(ev.params.iou_thrs[6], 0.8);
  EXPECT_EQ(ev.params.iou_thrs[7], 0.85);
  EXPECT_EQ(ev.params.iou_thrs[8], 0.8999999999999999);
  EXPECT_EQ(ev.params.iou_thrs[9], 0.95);
  EXPECT_EQ(ev.params.rec_thrs[3], 0.03);
  EXPECT_EQ(ev.params.rec_thrs[7], 0.07);
  EXPECT_EQ(ev.params.rec_thrs[35], 0.35000000000000003);
  EXPECT_EQ(ev.params.rec_thrs[57], 0.5700000000000001);
  EXPECT_EQ(ev.params.rec_thrs[100], 1.0);
}

TEST(CocoEval, PerfectDetectionAndEmptyCells) {
  const Coco gt = one_box_gt({10, 10, 20, 20});  // area 400: small
  const auto s = metrics::coco_evaluate(gt, gt.load_res({{1, 1, {10, 10, 20, 20}, 0.9}}));
  // Precision is tp / (tp + fp + 2.220446049250313e-16), so a perfect AP is 1 / (1 + eps), one ulp
  // under 1, as in pycocotools; recall is exactly 1.
  const double p1 = 1 / (1 + 2.220446049250313e-16);
  const std::array<double, 12> expect{p1, p1, p1, p1, -1, -1, 1, 1, 1, 1, -1, -1};
  for (int i = 0; i < 12; ++i)
    EXPECT_NEAR(s[size_t(i)], expect[size_t(i)], 1e-15) << CocoEval::stat_names()[size_t(i)];
}

TEST(CocoEval, IouOnTheThresholdMatches) {
  // The lower half of the gt: IoU exactly 0.5 -> a match at 0.5 only; AP = 1/10 (AP50 = 1, AP75 =
  // 0).
  const Coco gt = one_box_gt({0, 0, 40, 40});
  const auto s = metrics::coco_evaluate(gt, gt.load_res({{1, 1, {0, 0, 40, 20}, 0.9}}));
  EXPECT_DOUBLE_EQ(s[0], 0.1);
  EXPECT_DOUBLE_EQ(s[1], 1.0);
  EXPECT_EQ(s[2], 0.0);
  EXPECT_DOUBLE_EQ(s[8], 0.1);
}

TEST(CocoEval, FalsePositiveFirstHalvesPrecision) {
  // Two detections: a miss scored higher, then the hit. Precision at recall 1 is 1/2 at every
  // threshold -> AP = 0.5; AR@1 = 0 (the top detection misses), AR@10 = 1.
  const Coco gt = one_box_gt({0, 0, 40, 40});
  const auto s = metrics::coco_evaluate(
      gt, gt.load_res({{1, 1, {50, 50, 40, 40}, 0.9}, {1, 1, {0, 0, 40, 40}, 0.8}}));
  EXPECT_NEAR(s[0], 0.5, 1e-15);
  EXPECT_EQ(s[6], 0.0);
  EXPECT_EQ(s[7], 1.0);
}

TEST(CocoEval, CrowdRegionAbsorbsDetections) {
  // A crowd gt: detections inside it match (IoU = intersection / detection area = 1) and are
  // ignored; no gt counts, so every cell is -1.
  const Coco gt = one_box_gt({0, 0, 80, 80}, /*crowd=*/true);
  const auto s = metrics::coco_evaluate(
      gt, gt.load_res({{1, 1, {5, 5, 10, 10}, 0.9}, {1, 1, {20, 20, 10, 10}, 0.8}}));
  for (double v : s) EXPECT_EQ(v, -1.0);
}

TEST(CocoEval, AreaRangeBoundsAreInclusive) {
  // area exactly 32^2 is both small and medium.
  const Coco gt = one_box_gt({0, 0, 32, 32});
  const auto s = metrics::coco_evaluate(gt, gt.load_res({{1, 1, {0, 0, 32, 32}, 0.9}}));
  EXPECT_DOUBLE_EQ(s[3], 1.0);  // small
  EXPECT_DOUBLE_EQ(s[4], 1.0);  // medium
  EXPECT_EQ(s[5], -1.0);        // large
}

TEST(CocoEval, SummaryLinesArePycocotoolsFormat) {
  const Coco gt = one_box_gt({10, 10, 20, 20});
  CocoEval ev(gt, gt.load_res({{1, 1, {10, 10, 20, 20}, 0.9}}));
  ev.evaluate();
  ev.accumulate();
  const std::string text = ev.summarize();
  std::istringstream is(text);
  std::string first, line2;
  std::getline(is, first);
  std::getline(is, line2);
  EXPECT_EQ(first,
            " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000");
  EXPECT_EQ(line2,
            " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 1.000");
  EXPECT_NE(
      text.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000"),
      std::string::npos);
}

TEST(CocoEval, OrderOfCallsIsChecked) {
  const Coco gt = one_box_gt({10, 10, 20, 20});
  CocoEval ev(gt, gt.load_res(std::vector<CocoDetection>{}));
  EXPECT_NE(test::error_of([&] { ev.accumulate(); }).find("call evaluate() first"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { CocoEval(gt, gt, "segm"); }).find("'segm' is not supported"),
            std::string::npos);
}

TEST(CocoEval, BadFilesNameTheProblem) {
  const std::string dir = temp_dir("bad");
  EXPECT_NE(test::error_of([&] { Coco::load(dir + "/missing.json"); }).find("missing.json"),
            std::string::npos);
  write(dir + "/a.json", R"({"images": [{"id": 1, "file_name": "x.jpg"}], "categories": [{"id": 1}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3]}]})");
  const std::string e1 = test::error_of([&] { Coco::load(dir + "/a.json"); });
  EXPECT_NE(e1.find("\"annotations\" entry 0 (id 1), field \"bbox\": expected 4 numbers"),
            std::string::npos)
      << e1;
  write(dir + "/b.json", R"({"images": [{"id": 1}], "categories": [],
      "annotations": [{"id": 1, "image_id": 5, "category_id": 1, "bbox": [1, 2, 3, 4]}]})");
  const std::string e2 = test::error_of([&] { Coco::load(dir + "/b.json"); });
  EXPECT_NE(e2.find("image id 5 is not in \"images\""), std::string::npos) << e2;
  write(dir + "/c.json", R"({"images": [{"id": 1}], "categories": [],
      "annotations": [{"id": 0, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}]})");
  EXPECT_NE(test::error_of([&] { Coco::load(dir + "/c.json"); }).find("expected an id >= 1"),
            std::string::npos);
  write(dir + "/d.json", "{\"images\": [");
  EXPECT_NE(test::error_of([&] { Coco::load(dir + "/d.json"); }).find("malformed annotation file"),
            std::string::npos);
  const Coco gt = one_box_gt({10, 10, 20, 20});
  write(dir + "/r1.json",
        R"([{"image_id": 7, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}])");
  const std::string e3 = test::error_of([&] { gt.load_res(dir + "/r1.json"); });
  EXPECT_NE(e3.find("image id 7, which is not an image of the ground truth"), std::string::npos)
      << e3;
  EXPECT_NE(e3.find("r1.json"), std::string::npos) << e3;
  write(dir + "/r2.json", R"({"image_id": 1})");
  EXPECT_NE(test::error_of([&] { gt.load_res(dir + "/r2.json"); }).find("expected a JSON array"),
            std::string::npos);
  write(dir + "/r3.json", R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}])");
  EXPECT_NE(test::error_of([&] { gt.load_res(dir + "/r3.json"); }).find("field \"score\": missing"),
            std::string::npos);
  // A negative width: refused (pycocotools would compute a negative area and never match it).
  write(dir + "/r4.json",
        R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, -3, 4], "score": 0.5}])");
  const std::string e4 = test::error_of([&] { gt.load_res(dir + "/r4.json"); });
  EXPECT_NE(e4.find("detection 0 (image 1) has a negative width or height: bbox [1, 2, -3, 4]"),
            std::string::npos)
      << e4;
  EXPECT_NE(e4.find("r4.json"), std::string::npos) << e4;
  fs::remove_all(dir);
}

// Detections in categories the ground truth lacks are dropped as pycocotools drops them, but with a
// warning that names the ids and the likely cause (unmapped class indices).
TEST(CocoEval, DetectionsInUnknownCategoriesAreReported) {
  const Coco gt = one_box_gt({10, 10, 20, 20});
  const auto det = [](int64_t cat) {
    CocoDetection d;
    d.image_id = 1;
    d.category_id = cat;
    d.bbox = {10, 10, 20, 20};
    d.score = 0.9;
    return d;
  };
  testing::internal::CaptureStderr();
  gt.load_res(std::vector<CocoDetection>{det(gt.category_ids().front())});
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  const Coco dt = gt.load_res(std::vector<CocoDetection>{det(0), det(999), det(0)});
  const std::string w = testing::internal::GetCapturedStderr();
  EXPECT_NE(w.find("3 of 3 detections (the first: detection 0"), std::string::npos) << w;
  EXPECT_NE(w.find("absent from the ground truth's categories (0, 999;"), std::string::npos) << w;
  EXPECT_NE(w.find("map them to the data set's category ids"), std::string::npos) << w;
  // Still pycocotools' numbers: nothing matched, the one ground-truth box is missed.
  CocoEval ev(gt, dt);
  ev.evaluate();
  ev.accumulate();
  EXPECT_EQ(ev.stats()[0], 0.0);
}

TEST(CocoEval, SaveAndLoadRoundTrip) {
  const std::string dir = temp_dir("rt");
  const test::CocoCase c = test::make_coco_case(3);
  c.gt.save(dir + "/gt.json");
  metrics::save_detections(c.dets, dir + "/res.json");
  const Coco gt = Coco::load(dir + "/gt.json");
  ASSERT_EQ(gt.annotations().size(), c.gt.annotations().size());
  for (size_t i = 0; i < gt.annotations().size(); ++i) {
    EXPECT_EQ(gt.annotations()[i].bbox, c.gt.annotations()[i].bbox);  // bit for bit
    EXPECT_EQ(gt.annotations()[i].area, c.gt.annotations()[i].area);
    EXPECT_EQ(gt.annotations()[i].iscrowd, c.gt.annotations()[i].iscrowd);
  }
  const auto dets = metrics::load_detections(dir + "/res.json");
  ASSERT_EQ(dets.size(), c.dets.size());
  for (size_t i = 0; i < dets.size(); ++i) {
    EXPECT_EQ(dets[i].bbox, c.dets[i].bbox);
    EXPECT_EQ(dets[i].score, c.dets[i].score);
  }
  fs::remove_all(dir);
}

// The acceptance check: every generated case, all 12 numbers, against pycocotools.
TEST(CocoEval, MatchesPycocotoolsOnGeneratedCases) {
  const std::string dir = temp_dir("cases");
  std::map<std::string, std::array<double, 12>> mine;
  for (int n = 0; n < test::kNumCocoCases; ++n) {
    const test::CocoCase c = test::make_coco_case(n);
    const std::string d = dir + "/" + c.name;
    fs::create_directories(d);
    c.gt.save(d + "/gt.json");
    metrics::save_detections(c.dets, d + "/res.json");
    // Through the files, as a user would.
    const Coco gt = Coco::load(d + "/gt.json");
    mine[c.name] = metrics::coco_evaluate(gt, gt.load_res(d + "/res.json"));
  }
  const std::string fixture =
      std::string(SPORE_SOURCE_DIR) + "/tests/metrics/fixtures/coco_eval_pycocotools.json";
  std::string ref_path = fixture, source = "committed fixture (pycocotools' numbers)";
  if (has_pycocotools()) {
    ref_path = dir + "/pycocotools.json";
    source = "pycocotools, live";
    const std::string cmd = python() + " " + SPORE_SOURCE_DIR +
                            "/tests/metrics/coco_eval_crosscheck.py " + dir + " " + ref_path;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    if (const char* up = std::getenv("SPORE_UPDATE_FIXTURES"); up && std::string(up) == "1")
      fs::copy_file(ref_path, fixture, fs::copy_options::overwrite_existing);
  }
  std::ifstream f(ref_path);
  ASSERT_TRUE(f.good()) << ref_path;
  const nlohmann::json ref = nlohmann::json::parse(f)["stats"];
  ASSERT_EQ(ref.size(), size_t(test::kNumCocoCases)) << source;
  int exact = 0, total = 0;
  double worst = 0;
  for (const auto& [name, stats] : mine) {
    ASSERT_TRUE(ref.contains(name)) << name << " missing from " << source;
    for (size_t i = 0; i < 12; ++i) {
      const double r = ref[name][i].get<double>();
      EXPECT_NEAR(stats[i], r, 1e-12)
          << name << " " << metrics::CocoEval::stat_names()[i] << " (" << source << ")";
      exact += stats[i] == r;
      ++total;
      worst = std::max(worst, std::abs(stats[i] - r));
    }
  }
  std::printf("[coco] %d cases x 12 numbers vs %s: %d/%d bit-identical, largest difference %.3g\n",
              test::kNumCocoCases, source.c_str(), exact, total, worst);
  // The cases must exercise what they claim: crowd gt, -1 cells, > 100 detections on an image.
  int crowd = 0, minus_one = 0, over_100 = 0;
  for (int n = 0; n < test::kNumCocoCases; ++n) {
    const test::CocoCase c = test::make_coco_case(n);
    for (const auto& a : c.gt.annotations()) crowd += a.iscrowd;
    for (double v : mine[c.name]) minus_one += v == -1;
    std::map<int64_t, int> per_img;
    for (const auto& d : c.dets) over_100 += ++per_img[d.image_id] == 101;
  }
  EXPECT_GT(crowd, 10);
  EXPECT_GT(minus_one, 5);
  EXPECT_GT(over_100, 2);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace spore
