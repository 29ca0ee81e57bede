// The COCO JSON reader and writer (include/spore/io/coco.h): one pass of simdjson On-Demand over
// the bytes, each field checked as it is read, then the cross-entry rules (unique ids, annotations
// pointing at images).
#include "spore/io/coco.h"

#include <simdjson.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "spore/error.h"

namespace spore::io {
namespace {

namespace od = simdjson::ondemand;

// Where the parser is, for error messages: file, list, entry (and its id once read), field.
struct Where {
  std::string source;
  const char* who = "[Coco]";
  const char* what = "annotation file";
  const char* list = "";
  int64_t entry = -1;
  bool has_id = false;
  int64_t id = 0;
  const char* field = "";
  std::string str() const {
    std::string s = source;
    if (*list) {
      s += std::string(": \"") + list + "\" entry " + std::to_string(entry);
      if (has_id) s += " (id " + std::to_string(id) + ")";
    }
    if (*field) s += std::string(", field \"") + field + "\"";
    return s;
  }
  Where at(const char* l, int64_t e, const char* f) const {
    Where w = *this;
    w.list = l, w.entry = e, w.field = f, w.has_id = false;
    return w;
  }
};

[[noreturn]] void fail(const Where& w, const std::string& why) {
  SPORE_THROW(ErrorKind::IOError, w.who, " malformed ", w.what, " ", w.str(), ": ", why);
}

// simdjson's words for a syntax error, with what it usually means here.
std::string box_str(const std::array<double, 4>& b) {
  std::ostringstream o;
  o << b[0] << ", " << b[1] << ", " << b[2] << ", " << b[3];
  return o.str();
}

std::string syntax(const char* what) {
  return std::string(what) +
         " (the JSON is cut short or broken: was the file truncated while copying?)";
}
// A value of the wrong type is the file's content; any other error is broken JSON.
[[noreturn]] void fail_on(const Where& w, simdjson::error_code err, const char* expected) {
  fail(w, err == simdjson::INCORRECT_TYPE ? std::string(expected)
                                          : syntax(simdjson::error_message(err)));
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
    if (e.get_double().get(d) || !std::isfinite(d))
      fail(w, "expected 4 finite numbers [x, y, w, h]");
    if (k < 4) b[size_t(k)] = d;
    ++k;
  }
  if (k != 4) fail(w, "expected 4 numbers [x, y, w, h], got " + std::to_string(k));
  return b;
}

simdjson::padded_string load(const std::string& path, const char* who, const char* what) {
  simdjson::padded_string json;
  if (auto err = simdjson::padded_string::load(path).get(json))
    SPORE_THROW(ErrorKind::IOError, who, " cannot read the ", what, " ", path, ": ",
                simdjson::error_message(err), "; check the path");
  return json;
}

CocoImage parse_image(od::object obj, Where& w, const CocoRules& r) {
  CocoImage img;
  bool has_id = false, has_file = false;
  for (auto g : obj) {
    std::string_view name;
    if (g.unescaped_key().get(name)) fail(w, "bad key");
    if (name == "id") {
      w.field = "id", img.id = get_int(g.value(), w), has_id = true;
      w.has_id = true, w.id = img.id;
    } else if (name == "file_name") {
      w.field = "file_name", img.file_name = get_str(g.value(), w), has_file = true;
    } else if (name == "width") {
      w.field = "width", img.width = get_int(g.value(), w);
    } else if (name == "height") {
      w.field = "height", img.height = get_int(g.value(), w);
    }
    w.field = "";
  }
  if (!has_id) w.field = "id", fail(w, "missing");
  if (r.training && img.id < 0) w.field = "id", fail(w, "expected an image id >= 0");
  if (r.training && !has_file)
    w.field = "file_name", fail(w, "missing (the data set reads the image file)");
  return img;
}

CocoAnnotation parse_annotation(od::object obj, Where& w, const CocoRules& r) {
  CocoAnnotation a;
  bool has_id = false, has_img = false, has_cat = false, has_box = false, has_area = false;
  for (auto g : obj) {
    std::string_view name;
    if (g.unescaped_key().get(name)) fail(w, "bad key");
    if (name == "id") {
      w.field = "id", a.id = get_int(g.value(), w), has_id = true;
      w.has_id = true, w.id = a.id;
    } else if (name == "image_id") {
      w.field = "image_id", a.image_id = get_int(g.value(), w), has_img = true;
    } else if (name == "category_id") {
      w.field = "category_id", a.category_id = get_int(g.value(), w), has_cat = true;
      if (r.training && (a.category_id < INT32_MIN || a.category_id > INT32_MAX))
        fail(w, "category id " + std::to_string(a.category_id) + " does not fit int32");
    } else if (name == "bbox") {
      w.field = "bbox", a.bbox = get_box(g.value(), w), has_box = true;
      // A negative width or height is no box (its IoU would be meaningless): refused by every
      // reader. The data engine stores float32: a value beyond its range would become inf.
      if (a.bbox[2] < 0 || a.bbox[3] < 0)
        fail(w, "width and height must be >= 0, got [x, y, w, h] = [" + box_str(a.bbox) +
                    "]; fix the annotation (COCO boxes are top-left x, y, then width, height)");
      if (r.training && !(std::fabs(a.bbox[0]) <= FLT_MAX && std::fabs(a.bbox[1]) <= FLT_MAX &&
                          a.bbox[2] <= FLT_MAX && a.bbox[3] <= FLT_MAX))
        fail(w,
             "width and height must be finite, and every value within float32's range (the "
             "data engine stores float32)");
    } else if (name == "area") {
      w.field = "area", a.area = get_num(g.value(), w), has_area = true;
    } else if (name == "iscrowd") {
      w.field = "iscrowd";
      const int64_t c = get_int(g.value(), w);
      if (c != 0 && c != 1) fail(w, "expected 0 or 1, got " + std::to_string(c));
      a.iscrowd = c == 1;
    }
    w.field = "";
  }
  if (r.annotation_ids) {
    if (!has_id) w.field = "id", fail(w, "missing");
    if (a.id < 1)
      w.field = "id", fail(w, "expected an id >= 1 (pycocotools counts id 0 as no match), got " +
                                  std::to_string(a.id));
  }
  if (!has_img) w.field = "image_id", fail(w, "missing");
  if (!has_cat) w.field = "category_id", fail(w, "missing");
  if (!has_box) w.field = "bbox", fail(w, "missing");
  if (!has_area) a.area = a.bbox[2] * a.bbox[3];
  return a;
}

CocoCategory parse_category(od::object obj, Where& w) {
  CocoCategory c;
  bool has_id = false;
  for (auto g : obj) {
    std::string_view name;
    if (g.unescaped_key().get(name)) fail(w, "bad key");
    if (name == "id") {
      w.field = "id", c.id = get_int(g.value(), w), has_id = true;
      w.has_id = true, w.id = c.id;
    } else if (name == "name") {
      w.field = "name", c.name = get_str(g.value(), w);
    } else if (name == "supercategory") {
      w.field = "supercategory", c.supercategory = get_str(g.value(), w);
    }
    w.field = "";
  }
  if (!has_id) w.field = "id", fail(w, "missing");
  return c;
}

// Ids unique (pycocotools indexes by id), annotations pointing at images and (with a categories
// list) at categories.
void check_references(const CocoInstances& set, const Where& w, const CocoRules& r) {
  std::unordered_set<int64_t> images;
  images.reserve(set.images.size() * 2);
  for (size_t i = 0; i < set.images.size(); ++i)
    if (!images.insert(set.images[i].id).second)
      fail(w.at("images", int64_t(i), "id"),
           "duplicate image id " + std::to_string(set.images[i].id));
  std::unordered_set<int64_t> seen;
  for (size_t i = 0; i < set.annotations.size(); ++i) {
    const CocoAnnotation& a = set.annotations[i];
    if (r.annotation_ids && !seen.insert(a.id).second)
      fail(w.at("annotations", int64_t(i), "id"),
           "duplicate annotation id " + std::to_string(a.id));
    if (!images.count(a.image_id))
      fail(w.at("annotations", int64_t(i), "image_id"),
           "image id " + std::to_string(a.image_id) + " is not in \"images\"");
  }
  seen.clear();
  for (size_t i = 0; i < set.categories.size(); ++i)
    if (!seen.insert(set.categories[i].id).second)
      fail(w.at("categories", int64_t(i), "id"),
           "duplicate category id " + std::to_string(set.categories[i].id));
  // With a categories list, an annotation of another category would be silently left out of
  // every evaluation (and of the classes a model trains on).
  if (r.categories || !set.categories.empty())
    for (size_t i = 0; i < set.annotations.size(); ++i)
      if (!seen.count(set.annotations[i].category_id))
        fail(w.at("annotations", int64_t(i), "category_id"),
             "category id " + std::to_string(set.annotations[i].category_id) +
                 " is not in \"categories\"; add the category or fix the annotation");
}

CocoInstances parse_instances(const simdjson::padded_string& json, const std::string& source,
                              const CocoRules& r) {
  Where w{source, r.who};
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(json).get(doc)) fail(w, syntax(simdjson::error_message(err)));
  CocoInstances set;
  bool has_images = false, has_cats = false;
  try {
    od::object root;
    if (auto err = doc.get_object().get(root))
      fail(w, err == simdjson::INCORRECT_TYPE
                  ? "the top level is not a JSON object {\"images\": [...], ...}"
                  : syntax(simdjson::error_message(err)));
    for (auto f : root) {
      std::string_view key;
      if (f.unescaped_key().get(key)) fail(w, "bad key");
      const int which = key == "images"        ? 0
                        : key == "annotations" ? 1
                        : key == "categories"  ? 2
                                               : -1;
      if (which < 0) continue;
      w.list = which == 0 ? "images" : which == 1 ? "annotations" : "categories";
      w.entry = -1, w.has_id = false;
      od::array arr;
      if (auto err = f.value().get_array().get(arr)) fail_on(w, err, "expected an array");
      int64_t k = 0;
      for (auto e : arr) {
        w.entry = k++, w.has_id = false;
        od::object obj;
        if (auto err = e.get_object().get(obj)) fail_on(w, err, "expected an object");
        if (which == 0)
          set.images.push_back(parse_image(obj, w, r));
        else if (which == 1)
          set.annotations.push_back(parse_annotation(obj, w, r));
        else
          set.categories.push_back(parse_category(obj, w));
      }
      if (which == 0) has_images = true;
      if (which == 2) has_cats = true;
      w.list = "", w.entry = -1, w.has_id = false;
    }
  } catch (const simdjson::simdjson_error& e) {
    fail(w, syntax(e.what()));
  }
  if (!has_images)
    fail(w, "no \"images\" list; a COCO instances file has images, annotations and categories");
  if (r.categories && !has_cats)
    fail(w, "no \"categories\" list; a COCO instances file has images, annotations and categories");
  check_references(set, w, r);
  return set;
}

void write_text(const std::string& path, const std::string& text, const char* who,
                const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), who, " cannot write the ", what, " ", path,
                   "; check that its folder exists and is writable");
  f << text;
  f.close();
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), who, " writing the ", what, " ", path,
                   " failed (disk full?)");
}

}  // namespace

CocoInstances read_coco_instances(const std::string& path, const CocoRules& rules) {
  return parse_instances(load(path, rules.who, "annotation file"), path, rules);
}

CocoInstances parse_coco_instances(std::string_view json, const std::string& source,
                                   const CocoRules& rules) {
  return parse_instances(simdjson::padded_string(json), source, rules);
}

std::vector<CocoDetection> read_coco_results(const std::string& path, const char* who) {
  const simdjson::padded_string json = load(path, who, "results file");
  Where w{path, who, "results file"};
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(json).get(doc)) fail(w, syntax(simdjson::error_message(err)));
  std::vector<CocoDetection> dets;
  try {
    od::array arr;
    if (auto err = doc.get_array().get(arr))
      fail(w, err == simdjson::INCORRECT_TYPE
                  ? "expected a JSON array of {image_id, category_id, bbox, score} objects"
                  : syntax(simdjson::error_message(err)));
    w.list = "results";
    int64_t k = 0;
    for (auto e : arr) {
      w.entry = k++;
      od::object obj;
      if (auto err = e.get_object().get(obj)) fail_on(w, err, "expected an object");
      CocoDetection d;
      bool has_img = false, has_cat = false, has_box = false, has_score = false;
      for (auto g : obj) {
        std::string_view name;
        if (g.unescaped_key().get(name)) fail(w, "bad key");
        if (name == "image_id")
          w.field = "image_id", d.image_id = get_int(g.value(), w), has_img = true;
        else if (name == "category_id")
          w.field = "category_id", d.category_id = get_int(g.value(), w), has_cat = true;
        else if (name == "bbox")
          w.field = "bbox", d.bbox = get_box(g.value(), w), has_box = true;
        else if (name == "score")
          w.field = "score", d.score = get_num(g.value(), w), has_score = true;
        w.field = "";
      }
      if (!has_img) w.field = "image_id", fail(w, "missing");
      if (!has_cat) w.field = "category_id", fail(w, "missing");
      if (!has_box) w.field = "bbox", fail(w, "missing (only 'bbox' results are supported)");
      if (!has_score) w.field = "score", fail(w, "missing");
      dets.push_back(d);
    }
  } catch (const simdjson::simdjson_error& e) {
    fail(w, syntax(e.what()));
  }
  return dets;
}

void write_coco_instances(const CocoInstances& set, const std::string& path, const char* who) {
  nlohmann::json j;
  j["images"] = nlohmann::json::array();
  for (const auto& i : set.images)
    j["images"].push_back(
        {{"id", i.id}, {"file_name", i.file_name}, {"width", i.width}, {"height", i.height}});
  j["annotations"] = nlohmann::json::array();
  for (const auto& a : set.annotations)
    j["annotations"].push_back({{"id", a.id},
                                {"image_id", a.image_id},
                                {"category_id", a.category_id},
                                {"bbox", a.bbox},
                                {"area", a.area},
                                {"iscrowd", a.iscrowd ? 1 : 0}});
  j["categories"] = nlohmann::json::array();
  for (const auto& c : set.categories)
    j["categories"].push_back({{"id", c.id}, {"name", c.name}, {"supercategory", c.supercategory}});
  write_text(path, j.dump(), who, "annotation file");
}

void write_coco_results(const std::vector<CocoDetection>& dets, const std::string& path,
                        const char* who) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& d : dets)
    j.push_back({{"image_id", d.image_id},
                 {"category_id", d.category_id},
                 {"bbox", d.bbox},
                 {"score", d.score}});
  write_text(path, j.dump(), who, "results file");
}

}  // namespace spore::io
