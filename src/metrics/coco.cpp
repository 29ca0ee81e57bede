// metrics::Coco: pycocotools' COCO over the one COCO reader (src/io/coco.cpp). The evaluator needs
// a "categories" list and annotation ids (unique, >= 1: pycocotools tells a match by a non-zero
// id).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "core/log.h"
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
    return load_res(load_detections(path), path);
  } catch (const Error& e) {
    if (std::string(e.what()).find(path) != std::string::npos) throw;
    SPORE_THROW(e.kind(), e.what(), " (results file ", path, ")");
  }
}

Coco Coco::load_res(const std::vector<CocoDetection>& dets, const std::string& source) const {
  Coco res;
  res.set_.images = set_.images;
  res.set_.categories = set_.categories;
  std::unordered_set<int64_t> ids, cats;
  for (const CocoImage& img : set_.images) ids.insert(img.id);
  for (const auto& c : set_.categories) cats.insert(c.id);
  std::vector<int64_t> unknown_cats;  // detections' category ids absent from the ground truth
  size_t unknown = 0, first_unknown = 0;
  res.set_.annotations.reserve(dets.size());
  for (size_t i = 0; i < dets.size(); ++i) {
    const CocoDetection& d = dets[i];
    SPORE_CHECK(ids.count(d.image_id), "[CocoEval] detection ", i, " has image id ", d.image_id,
                ", which is not an image of the ground truth; the results must come from the same "
                "image set (pycocotools: 'Results do not correspond to current coco set')");
    // (A category the ground truth lacks is kept, as pycocotools keeps it: never evaluated;
    // the warning below says so.)
    SPORE_CHECK(
        std::isfinite(d.score) && std::isfinite(d.bbox[0] + d.bbox[1] + d.bbox[2] + d.bbox[3]),
        "[CocoEval] detection ", i, " (image ", d.image_id, ") has a non-finite box or score");
    if (!cats.count(d.category_id)) {
      if (unknown++ == 0) first_unknown = i;
      unknown_cats.push_back(d.category_id);
    }
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
  // pycocotools evaluates only the ground truth's categories and drops the rest without a word;
  // the same numbers here, but said aloud: a whole model's output in unknown ids is most often
  // 0-based class indices that were never mapped to the data set's category ids.
  if (unknown > 0) {
    unknown_cats = sorted_unique(std::move(unknown_cats));
    std::string list;
    for (size_t k = 0; k < unknown_cats.size() && k < 8; ++k)
      list += (k ? ", " : "") + std::to_string(unknown_cats[k]);
    if (unknown_cats.size() > 8) list += ", ...";
    const auto known = category_ids();
    log::warn(
        "[CocoEval] {}{} of {} detections (the first: detection {}, image {}) have category ids "
        "absent from the ground truth's categories ({}; the ground truth has {} categories, ids "
        "{}..{}); they are not evaluated, as in pycocotools. If these are the model's class "
        "indices, map them to the data set's category ids",
        source.empty() ? "" : source + ": ", unknown, dets.size(), first_unknown,
        dets[first_unknown].image_id, list, known.size(), known.empty() ? 0 : known.front(),
        known.empty() ? 0 : known.back());
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
