// COCO detection evaluation with pycocotools' exact semantics ('bbox'): the 12 standard numbers
// (AP@[.5:.95], AP50, AP75, AP small/medium/large, AR@1/10/100, AR small/medium/large).
//
//   auto gt = metrics::Coco::load("annotations/instances_val2017.json");
//   auto dt = gt.load_res("detections.json");          // or
//   gt.load_res(std::vector<CocoDetection>) metrics::CocoEval ev(gt, dt, "bbox"); ev.evaluate();
//   ev.accumulate(); std::cout << ev.summarize();                        // pycocotools' 12 lines;
//   ev.stats() the values
//
// Semantics (pycocotools' COCOeval, written down in docs/detection.md): per image and category the
// top max_dets[-1] detections by score (stable), IoU of [x, y, w, h] boxes where a crowd box's
// union is the detection's own area, greedy matching in score order with IoU >= t (ties to the
// later gt, thresholds capped at 1 - 1e-10), ground truth outside an area range (inclusive bounds,
// on the annotation's "area") or crowd is ignored, unmatched detections outside the range are
// ignored, 101-point interpolated precision with the 2.220446049250313e-16 guard, -1 where a cell
// has no ground truth. Ground-truth annotation ids must be unique and >= 1 (pycocotools tells
// matched from unmatched by a non-zero id).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spore/io/coco.h"

namespace spore::metrics {

// The file format's records (include/spore/io/coco.h): one reader for the data engine and the
// evaluator.
using io::CocoAnnotation;
using io::CocoCategory;
using io::CocoDetection;
using io::CocoImage;

// pycocotools' COCO: a ground-truth set (images, categories, annotations) or a result set made from
// one by load_res.
class Coco {
 public:
  Coco() = default;
  // Reads an instances JSON (images, annotations, categories) with simdjson. Errors name the file,
  // the entry and the field.
  static Coco load(const std::string& path);
  static Coco parse(std::string_view json, const std::string& source = "<string>");
  // A result set: detections from a results JSON (a list of {image_id, category_id, bbox, score})
  // or in memory. Every image id must be one of this set's images. Ids are 1, 2, ... in order, area
  // is w * h and iscrowd false, as pycocotools' loadRes.
  Coco load_res(const std::string& path) const;
  // `source` (a file name, when there is one) is named in the warning about unknown categories.
  Coco load_res(const std::vector<CocoDetection>& dets, const std::string& source = {}) const;

  // Building a set in memory (generated data sets, tests).
  void add_image(CocoImage img) { set_.images.push_back(std::move(img)); }
  void add_category(CocoCategory c) { set_.categories.push_back(std::move(c)); }
  void add_annotation(CocoAnnotation a) { set_.annotations.push_back(a); }
  // Writes the set as an instances JSON (ground truth) with round-trip precision.
  void save(const std::string& path) const;

  const std::vector<CocoImage>& images() const { return set_.images; }
  const std::vector<CocoCategory>& categories() const { return set_.categories; }
  const std::vector<CocoAnnotation>& annotations() const { return set_.annotations; }
  std::vector<int64_t> image_ids() const;     // sorted, unique
  std::vector<int64_t> category_ids() const;  // sorted, unique

 private:
  explicit Coco(io::CocoInstances set) : set_(std::move(set)) {}
  io::CocoInstances set_;
};

// Reads a results JSON into detections (no ground truth needed).
std::vector<CocoDetection> load_detections(const std::string& path);
// Writes detections as a results JSON with round-trip precision.
void save_detections(const std::vector<CocoDetection>& dets, const std::string& path);

struct CocoEvalParams {
  std::vector<int64_t> img_ids;  // default: every ground-truth image
  std::vector<int64_t> cat_ids;  // default: every ground-truth category
  std::vector<double> iou_thrs;  // numpy's linspace(.5, .95, 10)
  std::vector<double> rec_thrs;  // numpy's linspace(0, 1, 101)
  std::vector<int64_t> max_dets{1, 10, 100};
  std::vector<std::array<double, 2>> area_rng{{0, 1e10}, {0, 1024}, {1024, 9216}, {9216, 1e10}};
  std::vector<std::string> area_lbl{"all", "small", "medium", "large"};
};

class CocoEval {
 public:
  CocoEval(const Coco& gt, const Coco& dt, const std::string& iou_type = "bbox");
  CocoEvalParams params;

  void evaluate();    // per image, category and area range: matches at every IoU threshold
  void accumulate();  // precision (T, R, K, A, M) and recall (T, K, A, M)
  // Computes stats() and returns pycocotools' 12 lines (" Average Precision  (AP) @[ IoU=0.50:0.95
  // | area=   all | maxDets=100 ] = 0.512", ...).
  std::string summarize();
  const std::array<double, 12>& stats() const { return stats_; }
  static const std::array<const char*, 12>& stat_names();  // "AP", "AP50", ..., "AR_large"

  // accumulate()'s arrays; -1 where undefined.
  double precision(int64_t t, int64_t r, int64_t k, int64_t a, int64_t m) const;
  double recall(int64_t t, int64_t k, int64_t a, int64_t m) const;

  struct EvalImage {                  // one (image, category, area range): evaluate()'s result
    std::vector<double> dt_scores;    // (D) highest first
    std::vector<uint8_t> dt_matched;  // (T, D)
    std::vector<uint8_t> dt_ignore;   // (T, D)
    std::vector<uint8_t> gt_ignore;   // (G)
  };

 private:
  double summarize_one(bool ap, double iou_thr, const std::string& area, int64_t max_det) const;
  Coco gt_, dt_;  // copies: the evaluator outlives neither argument's scope by surprise
  std::vector<int64_t> img_ids_, cat_ids_;
  std::vector<EvalImage> eval_imgs_;  // [k][a][i]
  std::vector<uint8_t> eval_present_;
  std::vector<double> precision_, recall_;
  std::array<double, 12> stats_{};
  bool evaluated_ = false, accumulated_ = false;
};

// Everything at once: evaluate, accumulate, summarize. Returns the 12 numbers.
std::array<double, 12> coco_evaluate(const Coco& gt, const Coco& dt);

}  // namespace spore::metrics
