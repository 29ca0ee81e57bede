// CocoDataset (task "Detection"): the annotation JSON is parsed once, at construction, with
// simdjson's On-Demand API (one pass over the bytes, no DOM tape, so memory stays at the file's
// size), into flat per-image arrays. Each sample then reads (and decodes) its image
// file on a source worker and copies its boxes out: bbox float32 (K, 4) [x, y, w, h],
// category_id int32 (K, 1), iscrowd int32 (K, 1). Images without annotations are kept (K = 0).
// Malformed annotations are errors naming the file, the entry and the field.
#include <simdjson.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "data/file_util.h"
#include "data/node.h"

namespace spore::data {
namespace {

namespace od = simdjson::ondemand;

struct CocoImage {
  int64_t id = -1;
  std::string file;
};
struct CocoAnn {
  int64_t image_id = -1;
  float bbox[4];
  int32_t category = 0, crowd = 0;
};

struct CocoIndex {
  std::vector<CocoImage> images;
  std::vector<int64_t> offsets;  // annotations of image i: [offsets[i], offsets[i + 1])
  std::vector<float> bbox;       // (A, 4)
  std::vector<int32_t> category, crowd;
};

// The parse state, for error messages: which entry and field are being read.
struct Where {
  std::string path;
  const char* list = "";
  int64_t entry = -1, id = -1;
  const char* field = "";
  std::string str() const {
    std::string s = path;
    if (*list) {
      s += ": \"" + std::string(list) + "\" entry " + std::to_string(entry);
      if (id >= 0) s += " (id " + std::to_string(id) + ")";
    }
    if (*field) s += ", field \"" + std::string(field) + "\"";
    return s;
  }
};

[[noreturn]] void fail(const Where& w, const std::string& why) {
  SPORE_THROW(ErrorKind::IOError, "[CocoDataset] malformed annotation file ", w.str(), ": ", why);
}

int64_t get_id(od::value v, Where& w) {
  int64_t x;
  if (v.get_int64().get(x)) fail(w, "expected an integer");
  return x;
}

void parse_image(od::object obj, Where& w, CocoImage& img) {
  bool has_file = false;
  for (auto f : obj) {
    std::string_view key;
    if (f.unescaped_key().get(key)) fail(w, "bad key");
    if (key == "id") {
      w.field = "id";
      img.id = get_id(f.value(), w);
      w.id = img.id;
    } else if (key == "file_name") {
      w.field = "file_name";
      std::string_view s;
      if (f.value().get_string().get(s)) fail(w, "expected a string");
      img.file.assign(s);
      has_file = true;
    }
    w.field = "";
  }
  if (img.id < 0) w.field = "id", fail(w, "missing (or negative) image id");
  if (!has_file) w.field = "file_name", fail(w, "missing");
}

void parse_ann(od::object obj, Where& w, CocoAnn& a) {
  bool has_bbox = false, has_cat = false;
  for (auto f : obj) {
    std::string_view key;
    if (f.unescaped_key().get(key)) fail(w, "bad key");
    if (key == "id") {
      w.field = "id";
      w.id = get_id(f.value(), w);
    } else if (key == "image_id") {
      w.field = "image_id";
      a.image_id = get_id(f.value(), w);
    } else if (key == "category_id") {
      w.field = "category_id";
      const int64_t c = get_id(f.value(), w);
      if (c < INT32_MIN || c > INT32_MAX) fail(w, "category id " + std::to_string(c) + " does not fit int32");
      a.category = int32_t(c);
      has_cat = true;
    } else if (key == "iscrowd") {
      w.field = "iscrowd";
      const int64_t c = get_id(f.value(), w);
      if (c != 0 && c != 1) fail(w, "expected 0 or 1, got " + std::to_string(c));
      a.crowd = int32_t(c);
    } else if (key == "bbox") {
      w.field = "bbox";
      od::array arr;
      if (f.value().get_array().get(arr)) fail(w, "expected an array [x, y, w, h]");
      int k = 0;
      for (auto e : arr) {
        double d;
        if (e.get_double().get(d)) fail(w, "expected numbers [x, y, w, h]");
        // Checked as a double: converting one beyond the float range is undefined behaviour.
        if (!(std::fabs(d) <= double(FLT_MAX)))
          fail(w, "width and height must be finite and >= 0, and every value within float32's range");
        if (k < 4) a.bbox[k] = float(d);
        ++k;
      }
      if (k != 4) fail(w, "expected 4 numbers [x, y, w, h], got " + std::to_string(k));
      if (!std::isfinite(a.bbox[0] + a.bbox[1] + a.bbox[2] + a.bbox[3]) || a.bbox[2] < 0 ||
          a.bbox[3] < 0)
        fail(w, "width and height must be finite and >= 0");
      has_bbox = true;
    }
    w.field = "";
  }
  if (a.image_id < 0) w.field = "image_id", fail(w, "missing");
  if (!has_bbox) w.field = "bbox", fail(w, "missing");
  if (!has_cat) w.field = "category_id", fail(w, "missing");
}

CocoIndex parse_coco(const std::string& path) {
  SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_file(path), "[CocoDataset] annotation file ",
                   path, " does not exist");
  simdjson::padded_string json;
  if (auto err = simdjson::padded_string::load(path).get(json))
    SPORE_THROW(ErrorKind::IOError, "[CocoDataset] cannot read ", path, ": ",
                simdjson::error_message(err));
  Where w{path};
  std::vector<CocoImage> images;
  std::vector<CocoAnn> anns;
  bool has_images = false;
  od::parser parser;
  od::document doc;
  if (auto err = parser.iterate(json).get(doc)) fail(w, simdjson::error_message(err));
  try {
    od::object root;
    if (doc.get_object().get(root)) fail(w, "the top level is not a JSON object");
    for (auto f : root) {
      std::string_view key;
      if (f.unescaped_key().get(key)) fail(w, "bad key");
      if (key == "images" || key == "annotations") {
        const bool is_img = key == "images";
        w.list = is_img ? "images" : "annotations";
        od::array arr;
        if (f.value().get_array().get(arr)) w.entry = -1, fail(w, "expected an array");
        int64_t k = 0;
        for (auto e : arr) {
          w.entry = k++;
          w.id = -1;
          od::object obj;
          if (e.get_object().get(obj)) fail(w, "expected an object");
          if (is_img) {
            parse_image(obj, w, images.emplace_back());
          } else {
            parse_ann(obj, w, anns.emplace_back());
          }
        }
        has_images |= is_img;
        w.list = "";
      }
    }
  } catch (const simdjson::simdjson_error& e) {
    fail(w, e.what());
  }
  if (!has_images) fail(w, "no \"images\" list");

  CocoIndex idx;
  std::unordered_map<int64_t, int64_t> by_id;
  by_id.reserve(images.size() * 2);
  for (size_t i = 0; i < images.size(); ++i) {
    if (!by_id.emplace(images[i].id, int64_t(i)).second)
      fail(Where{path, "images", int64_t(i), images[i].id, "id"}, "duplicate image id");
  }
  std::vector<int64_t> owner(anns.size());
  idx.offsets.assign(images.size() + 1, 0);
  for (size_t k = 0; k < anns.size(); ++k) {
    auto it = by_id.find(anns[k].image_id);
    if (it == by_id.end())
      fail(Where{path, "annotations", int64_t(k), -1, "image_id"},
           "image id " + std::to_string(anns[k].image_id) + " is not in \"images\"");
    owner[k] = it->second;
    ++idx.offsets[size_t(it->second) + 1];
  }
  for (size_t i = 0; i < images.size(); ++i) idx.offsets[i + 1] += idx.offsets[i];
  idx.bbox.resize(anns.size() * 4);
  idx.category.resize(anns.size());
  idx.crowd.resize(anns.size());
  std::vector<int64_t> fill(idx.offsets.begin(), idx.offsets.end() - 1);
  for (size_t k = 0; k < anns.size(); ++k) {  // stable: each image keeps the file's order
    const size_t at = size_t(fill[size_t(owner[k])]++);
    std::memcpy(&idx.bbox[at * 4], anns[k].bbox, sizeof anns[k].bbox);
    idx.category[at] = anns[k].category;
    idx.crowd[at] = anns[k].crowd;
  }
  idx.images = std::move(images);
  return idx;
}

class CocoNode : public SourceNode {
 public:
  CocoNode(std::string dir, CocoIndex idx, const CocoOptions& o)
      : SourceNode(common_options(o), default_num_workers()),
        dir_(std::move(dir)),
        idx_(std::move(idx)),
        decode_(o.decode) {}
  int64_t num_rows() const override { return int64_t(idx_.images.size()); }
  Row load(int64_t i) const override {
    const int64_t a = idx_.offsets[size_t(i)], k = idx_.offsets[size_t(i) + 1] - a;
    Tensor bbox = Tensor::empty({k, 4}, kFloat32);
    Tensor cat = Tensor::empty({k, 1}, kInt32), crowd = Tensor::empty({k, 1}, kInt32);
    if (k > 0) {
      std::memcpy(bbox.data_ptr(), &idx_.bbox[size_t(a) * 4], size_t(k) * 4 * sizeof(float));
      std::memcpy(cat.data_ptr(), &idx_.category[size_t(a)], size_t(k) * sizeof(int32_t));
      std::memcpy(crowd.data_ptr(), &idx_.crowd[size_t(a)], size_t(k) * sizeof(int32_t));
    }
    return {detail::load_image(path(i), decode_, "CocoDataset"), bbox, cat, crowd};
  }
  std::vector<std::string> column_names() const override {
    return {"image", "bbox", "category_id", "iscrowd"};
  }
  std::string name() const override { return "CocoDataset"; }
  std::string describe_sample(int64_t i) const override {
    if (i < 0 || i >= num_rows()) return "";
    return path(i) + ", image id " + std::to_string(idx_.images[size_t(i)].id);
  }

 private:
  std::string path(int64_t i) const { return detail::join_path(dir_, idx_.images[size_t(i)].file); }
  std::string dir_;
  CocoIndex idx_;
  bool decode_;
};

}  // namespace

Dataset CocoDataset(const std::string& dir, const std::string& annotation_file,
                    const CocoOptions& opts) {
  SPORE_CHECK_KIND(ErrorKind::NotImplemented, opts.task == "Detection", "[CocoDataset] task \"",
                   opts.task,
                   "\" is not supported; this build reads task \"Detection\" (image, bbox, "
                   "category_id, iscrowd)");
  SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_dir(dir), "[CocoDataset] image folder ", dir,
                   " is not a directory");
  auto node = std::make_shared<CocoNode>(dir, parse_coco(annotation_file), opts);
  node->check_options();
  return Dataset(node);
}

}  // namespace spore::data
