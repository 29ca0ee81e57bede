// metrics::Coco: COCO instances JSON (ground truth) and results JSON (detections), read with
// simdjson's On-Demand API and written with nlohmann-json (round-trip precision for every double).
// Unknown keys (segmentation, keypoints, info, licenses) are skipped. Every malformed entry is an
// IOError naming the file, the list, the entry and the field.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "spore/error.h"
#include "spore/metrics/coco_eval.h"

namespace spore::metrics {
namespace {

namespace od = simdjson::ondemand;

// Where the parser is, for error messages.
struct Where {
  std::string source;
  const char* list = "";
  int64_t entry = -1;
  const char* field = "";
  std::string str() const {
    std::string s = source;
    if (*list) s += std::string(": \"") + list + "\" entry " + std::to_string(entry);
    if (*field) s += std::string(", field \"") + field + "\"";
    return s;
  }
};

[[noreturn]] void fail(const Where& w, const std::string& why, const char* what = "annotation file") {
  SPORE_THROW(ErrorKind::IOError, "[CocoEval] malformed ", what, " ", w.str(), ": ", why);
}

int64_t get_int(od::value v, const Where& w) {
  int64_t x;
  if (v.get_int64().get(x)) fail(w, "expected an integer");
  return x;
}
double get_num(od::value v, const Where& w) {
  double x;
  if (v.get_double().get(x)) fail(w, "expected a number");
  if (!std::isfinite(x)) fail(w, "expected a finite number");
  return x;
}
std::string get_str(od::value v, const Where& w) {
  std::string_view s;
  if (v.get_string().get(s)) fail(w, "expected a string");
  return std::string(s);
}
std::array<double, 4> get_box(od::value v, const Where& w) {
  od::array arr;
  if (v.get_array().get(arr)) fail(w, "expected an array [x, y, w, h]");
  std::array<double, 4> b{};
  int k = 0;
  for (auto e : arr) {
    double d;
    if (e.get_double().get(d) || !std::isfinite(d)) fail(w, "expected 4 finite numbers [x, y, w, h]");
    if (k < 4) b[size_t(k)] = d;
    ++k;
  }
  if (k != 4) fail(w, "expected 4 numbers [x, y, w, h], got " + std::to_string(k));
  return b;
}

simdjson::padded_string read_file(const std::string& path, const char* what) {
  simdjson::padded_string json;
  if (auto err = simdjson::padded_string::load(path).get(json))
    SPORE_THROW(ErrorKind::IOError, "[CocoEval] cannot read the ", what, " ", path, ": ",
                simdjson::error_message(err), "; check the path");
  return json;
}

void parse_gt(const simdjson::padded_string& json, const std::string& source, Coco& out) {
  Where w{source};
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(json).get(doc)) fail(w, simdjson::error_message(err));
  bool has_images = false, has_anns = false, has_cats = false;
  try {
    od::object root;
    if (doc.get_object().get(root)) fail(w, "the top level is not a JSON object");
    for (auto f : root) {
      std::string_view key;
      if (f.unescaped_key().get(key)) fail(w, "bad key");
      const int which = key == "images" ? 0 : key == "annotations" ? 1 : key == "categories" ? 2 : -1;
      if (which < 0) continue;
      w.list = which == 0 ? "images" : which == 1 ? "annotations" : "categories";
      w.entry = -1;
      od::array arr;
      if (f.value().get_array().get(arr)) fail(w, "expected an array");
      int64_t k = 0;
      for (auto e : arr) {
        w.entry = k++;
        od::object obj;
        if (e.get_object().get(obj)) fail(w, "expected an object");
        if (which == 0) {
          CocoImage img;
          bool has_id = false;
          for (auto g : obj) {
            std::string_view name;
            if (g.unescaped_key().get(name)) fail(w, "bad key");
            if (name == "id") w.field = "id", img.id = get_int(g.value(), w), has_id = true;
            else if (name == "file_name") w.field = "file_name", img.file_name = get_str(g.value(), w);
            else if (name == "width") w.field = "width", img.width = get_int(g.value(), w);
            else if (name == "height") w.field = "height", img.height = get_int(g.value(), w);
            w.field = "";
          }
          if (!has_id) w.field = "id", fail(w, "missing");
          out.add_image(std::move(img));
        } else if (which == 1) {
          CocoAnnotation a;
          bool has_id = false, has_img = false, has_cat = false, has_box = false, has_area = false;
          for (auto g : obj) {
            std::string_view name;
            if (g.unescaped_key().get(name)) fail(w, "bad key");
            if (name == "id") w.field = "id", a.id = get_int(g.value(), w), has_id = true;
            else if (name == "image_id") w.field = "image_id", a.image_id = get_int(g.value(), w), has_img = true;
            else if (name == "category_id") w.field = "category_id", a.category_id = get_int(g.value(), w), has_cat = true;
            else if (name == "bbox") w.field = "bbox", a.bbox = get_box(g.value(), w), has_box = true;
            else if (name == "area") w.field = "area", a.area = get_num(g.value(), w), has_area = true;
            else if (name == "iscrowd") {
              w.field = "iscrowd";
              const int64_t c = get_int(g.value(), w);
              if (c != 0 && c != 1) fail(w, "expected 0 or 1, got " + std::to_string(c));
              a.iscrowd = c == 1;
            }
            w.field = "";
          }
          if (!has_id) w.field = "id", fail(w, "missing");
          if (a.id < 1) w.field = "id", fail(w, "expected an id >= 1 (pycocotools counts id 0 as no match), got " + std::to_string(a.id));
          if (!has_img) w.field = "image_id", fail(w, "missing");
          if (!has_cat) w.field = "category_id", fail(w, "missing");
          if (!has_box) w.field = "bbox", fail(w, "missing");
          if (!has_area) a.area = a.bbox[2] * a.bbox[3];
          out.add_annotation(a);
        } else {
          CocoCategory c;
          bool has_id = false;
          for (auto g : obj) {
            std::string_view name;
            if (g.unescaped_key().get(name)) fail(w, "bad key");
            if (name == "id") w.field = "id", c.id = get_int(g.value(), w), has_id = true;
            else if (name == "name") w.field = "name", c.name = get_str(g.value(), w);
            else if (name == "supercategory") w.field = "supercategory", c.supercategory = get_str(g.value(), w);
            w.field = "";
          }
          if (!has_id) w.field = "id", fail(w, "missing");
          out.add_category(std::move(c));
        }
      }
      (which == 0 ? has_images : which == 1 ? has_anns : has_cats) = true;
      w.list = "";
      w.entry = -1;
    }
  } catch (const simdjson::simdjson_error& e) {
    fail(w, e.what());
  }
  if (!has_images) fail(w, "no \"images\" list; a COCO instances file has images, annotations and categories");
  if (!has_cats) fail(w, "no \"categories\" list; a COCO instances file has images, annotations and categories");
  (void)has_anns;  // a set without annotations is valid (nothing to find)
  // Ids must be unique: pycocotools indexes images and annotations by id.
  std::unordered_set<int64_t> seen;
  for (size_t i = 0; i < out.images().size(); ++i)
    if (!seen.insert(out.images()[i].id).second)
      fail(Where{source, "images", int64_t(i), "id"}, "duplicate image id " + std::to_string(out.images()[i].id));
  const std::unordered_set<int64_t> images = std::move(seen);
  seen.clear();
  for (size_t i = 0; i < out.annotations().size(); ++i) {
    const CocoAnnotation& a = out.annotations()[i];
    if (!seen.insert(a.id).second)
      fail(Where{source, "annotations", int64_t(i), "id"}, "duplicate annotation id " + std::to_string(a.id));
    if (!images.count(a.image_id))
      fail(Where{source, "annotations", int64_t(i), "image_id"},
           "image id " + std::to_string(a.image_id) + " is not in \"images\"");
  }
  seen.clear();
  for (size_t i = 0; i < out.categories().size(); ++i)
    if (!seen.insert(out.categories()[i].id).second)
      fail(Where{source, "categories", int64_t(i), "id"}, "duplicate category id " + std::to_string(out.categories()[i].id));
}

std::vector<CocoDetection> parse_results(const simdjson::padded_string& json, const std::string& source) {
  Where w{source};
  const char* what = "results file";
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(json).get(doc)) fail(w, simdjson::error_message(err), what);
  std::vector<CocoDetection> dets;
  try {
    od::array arr;
    if (doc.get_array().get(arr))
      fail(w, "expected a JSON array of {image_id, category_id, bbox, score} objects", what);
    w.list = "results";
    int64_t k = 0;
    for (auto e : arr) {
      w.entry = k++;
      od::object obj;
      if (e.get_object().get(obj)) fail(w, "expected an object", what);
      CocoDetection d;
      bool has_img = false, has_cat = false, has_box = false, has_score = false;
      for (auto g : obj) {
        std::string_view name;
        if (g.unescaped_key().get(name)) fail(w, "bad key", what);
        if (name == "image_id") w.field = "image_id", d.image_id = get_int(g.value(), w), has_img = true;
        else if (name == "category_id") w.field = "category_id", d.category_id = get_int(g.value(), w), has_cat = true;
        else if (name == "bbox") w.field = "bbox", d.bbox = get_box(g.value(), w), has_box = true;
        else if (name == "score") w.field = "score", d.score = get_num(g.value(), w), has_score = true;
        w.field = "";
      }
      if (!has_img) w.field = "image_id", fail(w, "missing", what);
      if (!has_cat) w.field = "category_id", fail(w, "missing", what);
      if (!has_box) w.field = "bbox", fail(w, "missing (only 'bbox' results are supported)", what);
      if (!has_score) w.field = "score", fail(w, "missing", what);
      dets.push_back(d);
    }
  } catch (const simdjson::simdjson_error& e) {
    fail(w, e.what(), what);
  }
  return dets;
}

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void write_text(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[CocoEval] cannot write the ", what, " ", path,
                   "; check that its folder exists and is writable");
  f << text;
  f.close();
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[CocoEval] writing the ", what, " ", path,
                   " failed (disk full?)");
}

}  // namespace

Coco Coco::load(const std::string& path) {
  Coco c;
  parse_gt(read_file(path, "annotation file"), path, c);
  return c;
}

Coco Coco::parse(std::string_view json, const std::string& source) {
  Coco c;
  parse_gt(simdjson::padded_string(json), source, c);
  return c;
}

std::vector<CocoDetection> load_detections(const std::string& path) {
  return parse_results(read_file(path, "results file"), path);
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
  res.images_ = images_;
  res.categories_ = categories_;
  std::unordered_set<int64_t> ids;
  for (const CocoImage& img : images_) ids.insert(img.id);
  res.annotations_.reserve(dets.size());
  for (size_t i = 0; i < dets.size(); ++i) {
    const CocoDetection& d = dets[i];
    SPORE_CHECK(ids.count(d.image_id), "[CocoEval] detection ", i, " has image id ", d.image_id,
                ", which is not an image of the ground truth; the results must come from the same "
                "image set (pycocotools: 'Results do not correspond to current coco set')");
    SPORE_CHECK(std::isfinite(d.score) && std::isfinite(d.bbox[0] + d.bbox[1] + d.bbox[2] + d.bbox[3]),
                "[CocoEval] detection ", i, " (image ", d.image_id, ") has a non-finite box or score");
    CocoAnnotation a;
    a.id = int64_t(i) + 1;
    a.image_id = d.image_id;
    a.category_id = d.category_id;
    a.bbox = d.bbox;
    a.area = d.bbox[2] * d.bbox[3];
    a.score = d.score;
    res.annotations_.push_back(a);
  }
  return res;
}

std::vector<int64_t> Coco::image_ids() const {
  std::vector<int64_t> v;
  for (const auto& i : images_) v.push_back(i.id);
  return sorted_unique(std::move(v));
}
std::vector<int64_t> Coco::category_ids() const {
  std::vector<int64_t> v;
  for (const auto& c : categories_) v.push_back(c.id);
  return sorted_unique(std::move(v));
}

void Coco::save(const std::string& path) const {
  nlohmann::json j;
  j["images"] = nlohmann::json::array();
  for (const auto& i : images_)
    j["images"].push_back({{"id", i.id}, {"file_name", i.file_name}, {"width", i.width}, {"height", i.height}});
  j["annotations"] = nlohmann::json::array();
  for (const auto& a : annotations_)
    j["annotations"].push_back({{"id", a.id}, {"image_id", a.image_id}, {"category_id", a.category_id},
                                {"bbox", a.bbox}, {"area", a.area}, {"iscrowd", a.iscrowd ? 1 : 0}});
  j["categories"] = nlohmann::json::array();
  for (const auto& c : categories_)
    j["categories"].push_back({{"id", c.id}, {"name", c.name}, {"supercategory", c.supercategory}});
  write_text(path, j.dump(), "annotation file");
}

void save_detections(const std::vector<CocoDetection>& dets, const std::string& path) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& d : dets)
    j.push_back({{"image_id", d.image_id}, {"category_id", d.category_id}, {"bbox", d.bbox}, {"score", d.score}});
  write_text(path, j.dump(), "results file");
}

}  // namespace spore::metrics
