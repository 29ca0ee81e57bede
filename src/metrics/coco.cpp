// metrics::Coco: pycocotools' COCO over the one COCO reader (src/io/coco.cpp). The evaluator needs
// a "categories" list and annotation ids (unique, >= 1: pycocotools tells a match by a non-zero
// id).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "spore/error.h"
#include "spore/metrics/coco_eval.h"

namespace spore::metrics {
namespace {

constexpr io::CocoRules kEvalRules{.who = "[CocoEval]", .categories = true, .annotation_ids = true};

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

Coco Coco::load(const std::string& path) { return Coco(io::read_coco_instances(path, kEvalRules)); }

Coco Coco::parse(std::string_view json, const std::string& source) {
  return Coco(io::parse_coco_instances(json, source, kEvalRules));
}

std::vector<CocoDetection> load_detections(const std::string& path) {
  return io::read_coco_results(path, "[CocoEval]");
}

Coco Coco::load_res(const std::string& path) const {
  try {
    return load_res(load_detections(path));
  } catch (const Error& e) {
    if (std::string(e.what()).find(path) != std::string::npos) throw;
    SPORE_THROW(e.kind(), e.what(), " (results file ", path, ")");
  }
}

Coco Coco::load_res(const std::vector<CocoDetection>& dets) const {
  Coco res;
  res.set_.images = set_.images;
  res.set_.categories = set_.categories;
  std::unordered_set<int64_t> ids;
  for (const CocoImage& img : set_.images) ids.insert(img.id);
  res.set_.annotations.reserve(dets.size());
  for (size_t i = 0; i < dets.size(); ++i) {
    const CocoDetection& d = dets[i];
    SPORE_CHECK(ids.count(d.image_id), "[CocoEval] detection ", i, " has image id ", d.image_id,
                ", which is not an image of the ground truth; the results must come from the same "
                "image set (pycocotools: 'Results do not correspond to current coco set')");
    // (A category the ground truth lacks is kept, as pycocotools keeps it: never evaluated;
    // `spore coco-eval` says so.)
    SPORE_CHECK(
        std::isfinite(d.score) && std::isfinite(d.bbox[0] + d.bbox[1] + d.bbox[2] + d.bbox[3]),
        "[CocoEval] detection ", i, " (image ", d.image_id, ") has a non-finite box or score");
    SPORE_CHECK(d.bbox[2] >= 0 && d.bbox[3] >= 0, "[CocoEval] detection ", i, " (image ",
                d.image_id, ") has a negative width or height: bbox [", d.bbox[0], ", ", d.bbox[1],
                ", ", d.bbox[2], ", ", d.bbox[3],
                "]; COCO boxes are [x, y, width, height] with width and height >= 0 (was it "
                "written as [x1, y1, x2, y2]?)");
    CocoAnnotation a;
    a.id = int64_t(i) + 1;
    a.image_id = d.image_id;
    a.category_id = d.category_id;
    a.bbox = d.bbox;
    a.area = d.bbox[2] * d.bbox[3];
    a.score = d.score;
    res.set_.annotations.push_back(a);
  }
  return res;
}

std::vector<int64_t> Coco::image_ids() const {
  std::vector<int64_t> v;
  for (const auto& i : set_.images) v.push_back(i.id);
  return sorted_unique(std::move(v));
}
std::vector<int64_t> Coco::category_ids() const {
  std::vector<int64_t> v;
  for (const auto& c : set_.categories) v.push_back(c.id);
  return sorted_unique(std::move(v));
}

void Coco::save(const std::string& path) const {
  io::write_coco_instances(set_, path, "[CocoEval]");
}

void save_detections(const std::vector<CocoDetection>& dets, const std::string& path) {
  io::write_coco_results(dets, path, "[CocoEval]");
}

}  // namespace spore::metrics
