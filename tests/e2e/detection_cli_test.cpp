// End to end, the detection commands of `spore`: data make-shapes writes a COCO-layout set,
// coco-eval scores a results file (perfect detections score 1), train yolov5n runs a short training
// with evaluation and writes its checkpoint, metrics and curves, eval and predict read the
// checkpoint back; bad inputs are one-line errors.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "e2e/cli_run.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "spore/metrics/coco_eval.h"

namespace {

namespace fs = std::filesystem;
using spore::e2e::kSpore;

using spore::e2e::Result;
using spore::e2e::run;
fs::path temp_dir(const std::string& name) { return spore::e2e::temp_dir("spore_e2e_det_", name); }

TEST(DetectionCli, MakeShapesThenCocoEval) {
  const fs::path d = temp_dir("shapes");
  Result r =
      run("data make-shapes --out " + d.string() + " --train 6 --val 10 --size 128 --seed 5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote 16 images"), std::string::npos) << r.out;
  const std::string gt = (d / "annotations/instances_val2017.json").string();
  ASSERT_TRUE(fs::exists(gt));
  ASSERT_TRUE(fs::exists(d / "train2017/000000000006.jpg"));
  // The ground truth as detections: AP 1.000 wherever there is ground truth.
  const auto coco = spore::metrics::Coco::load(gt);
  std::vector<spore::metrics::CocoDetection> dets;
  for (const auto& a : coco.annotations())
    if (!a.iscrowd) dets.push_back({a.image_id, a.category_id, a.bbox, 0.9});
  spore::metrics::save_detections(dets, (d / "res.json").string());
  r = run("coco-eval " + gt + " " + (d / "res.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(
      r.out.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000"),
      std::string::npos)
      << r.out;
  r = run("coco-eval " + gt + " " + (d / "res.json").string() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["AP"].get<double>(), 1.0, 1e-12) << r.out;
  EXPECT_EQ(j["AP_large"].get<double>(), -1.0) << r.out;  // 128 px images: nothing large
  // Errors: a missing file, results on an image the ground truth lacks.
  r = run("coco-eval " + gt + " " + (d / "nope.json").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("nope.json"), std::string::npos) << r.out;
  std::ofstream(d / "bad.json")
      << R"([{"image_id": 12345, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1}])";
  r = run("coco-eval " + gt + " " + (d / "bad.json").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("image id 12345"), std::string::npos) << r.out;
  // A category the ground truth lacks: evaluated as pycocotools does (not at all), but said.
  std::vector<spore::metrics::CocoDetection> odd = {dets[0]};
  odd[0].category_id = 999;
  spore::metrics::save_detections(odd, (d / "odd.json").string());
  r = run("coco-eval " + gt + " " + (d / "odd.json").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 of 1 detections (the first: detection 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("absent from the ground truth's categories (999;"), std::string::npos)
      << r.out;
  r = run("data make-shapes --out " + d.string() + " --size 10");
  EXPECT_EQ(r.code, 2) << r.out;
  fs::remove_all(d);
}

TEST(DetectionCli, TrainYolov5nThenEvalAndPredict) {
  const fs::path d = temp_dir("train");
  Result r = run("data make-shapes --out " + (d / "data").string() +
                 " --train 16 --val 8 --size 128 --seed 2");
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path out = d / "run";
  r = run("train yolov5n --data " + (d / "data").string() +
          " --img 128 --epochs 2 --batch-size 8 --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 2/2: loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("val mAP@[.5:.95]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ]"),
            std::string::npos)
      << r.out;
  for (const char* f : {"yolov5n.safetensors", "metrics.jsonl", "metrics.csv", "curves.png"})
    EXPECT_TRUE(fs::exists(out / f)) << f << "\n" << r.out;
  const std::string ckpt = (out / "yolov5n.safetensors").string();
  r = run("eval yolov5n --ckpt " + ckpt + " --data " + (d / "data").string() + " --save-json " +
          (d / "dets.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ]"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(d / "dets.json"));
  r = run("predict yolov5n --ckpt " + ckpt + " " + (d / "data/val2017/000000000001.jpg").string() +
          " --conf 0.01 --out " + (d / "pred.jpg").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("detections; wrote"), std::string::npos) << r.out;
  EXPECT_GT(fs::file_size(d / "pred.jpg"), 1000u);
  // Fine-tuning from the checkpoint (--weights); --resume is refused with that hint; and the ONNX
  // export of the trained detector takes its classes and image size from the checkpoint.
  r = run("train yolov5n --data " + (d / "data").string() +
          " --img 128 --epochs 1 --batch-size 8 --weights " + ckpt + " --out " +
          (d / "tuned").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("starting from the weights in"), std::string::npos) << r.out;
  r = run("train yolov5n --data " + (d / "data").string() + " --img 128 --epochs 1 --resume " +
          ckpt);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--weights"), std::string::npos) << r.out;
  r = run("export yolov5n --ckpt " + ckpt + " --out " + (d / "y.onnx").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(N, 3, 128, 128)"), std::string::npos) << r.out;
  // A checkpoint of another model, a data folder that is not COCO-shaped.
  r = run("eval yolov5s --ckpt " + ckpt + " --data " + (d / "data").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("holds a yolov5n, not a yolov5s"), std::string::npos) << r.out;
  r = run("train yolov5n --data " + d.string() + " --epochs 1 --out " + (d / "x").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("spore data make-shapes"), std::string::npos) << r.out;
  fs::remove_all(d);
}

}  // namespace
