// The COCO file formats: an instances JSON (images, annotations, categories: the ground truth) and
// a results JSON (a list of {image_id, category_id, bbox, score}). One reader, used by the data
// engine (data::CocoDataset) and by the evaluator (metrics::Coco); each states what it needs in
// CocoRules. Read with simdjson's On-Demand API (one pass, no DOM), written with nlohmann-json
// (round-trip precision for every double). Unknown keys (segmentation, keypoints, info, licenses)
// are skipped. Every malformed entry is an IOError naming the file, the list, the entry (and its
// id) and the field.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spore::io {

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  int64_t width = 0, height = 0;
};
struct CocoCategory {
  int64_t id = 0;
  std::string name, supercategory;
};
// A ground-truth annotation or (score set, iscrowd false) a detection.
struct CocoAnnotation {
  int64_t id = 0, image_id = 0, category_id = 0;
  std::array<double, 4> bbox{};  // x, y, w, h (top-left corner, pixels)
  double area = 0;  // ground truth: the file's "area" (w * h when absent); detections: w * h
  bool iscrowd = false;
  double score = 0;
};
// One detection, as in a COCO results file.
struct CocoDetection {
  int64_t image_id = 0, category_id = 0;
  std::array<double, 4> bbox{};  // x, y, w, h
  double score = 0;
};

struct CocoInstances {
  std::vector<CocoImage> images;
  std::vector<CocoAnnotation> annotations;  // in the file's order
  std::vector<CocoCategory> categories;
};

// What a reader needs beyond the format itself. Always checked: the top level is an object with an
// "images" list; image ids are present and unique; every annotation has image_id (one of the
// images), category_id and a bbox of 4 finite numbers; iscrowd is 0 or 1.
struct CocoRules {
  const char* who = "[Coco]";  // the error messages' prefix: "[CocoDataset]", "[CocoEval]"
  bool categories = false;     // a "categories" list with unique ids (the evaluator)
  bool annotation_ids =
      false;  // annotation ids present, unique and >= 1 (pycocotools matches by id)
  // The data engine: image ids >= 0 with a file_name, boxes with width and height >= 0 within
  // float32's range, category ids within int32 (it stores float32 boxes and int32 categories).
  bool training = false;
};

// Reads an instances JSON from a file (an error naming the path when it cannot be read) or from
// text
// (`source` names it in errors).
CocoInstances read_coco_instances(const std::string& path, const CocoRules& rules);
CocoInstances parse_coco_instances(std::string_view json, const std::string& source,
                                   const CocoRules& rules);
// Reads a results JSON into detections (only 'bbox' results).
std::vector<CocoDetection> read_coco_results(const std::string& path, const char* who = "[Coco]");

void write_coco_instances(const CocoInstances& set, const std::string& path,
                          const char* who = "[Coco]");
void write_coco_results(const std::vector<CocoDetection>& dets, const std::string& path,
                        const char* who = "[Coco]");

}  // namespace spore::io
