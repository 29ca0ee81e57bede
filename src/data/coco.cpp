// CocoDataset (task "Detection"): the annotation JSON is read once, at construction, by the one
// COCO reader (src/io/coco.cpp, shared with the evaluator), into flat per-image arrays. Each sample
// then reads (and decodes) its image file on a source worker and copies its boxes out: bbox float32
// (K, 4) [x, y, w, h], category_id int32 (K, 1), iscrowd int32 (K, 1). Images without annotations
// are kept (K = 0). Malformed annotations are errors naming the file, the entry and the field.
#include <cstring>
#include <unordered_map>

#include "data/file_util.h"
#include "data/node.h"
#include "spore/io/coco.h"

namespace spore::data {
namespace {

// The annotations by image, flat: what a sample copies out.
struct CocoIndex {
  std::vector<io::CocoImage> images;
  std::vector<int64_t> offsets;  // annotations of image i: [offsets[i], offsets[i + 1])
  std::vector<float> bbox;       // (A, 4)
  std::vector<int32_t> category, crowd;
};

CocoIndex index_coco(const std::string& path) {
  SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_file(path), "[CocoDataset] annotation file ",
                   path, " does not exist");
  io::CocoInstances set = io::read_coco_instances(path, {.who = "[CocoDataset]", .training = true});
  CocoIndex idx;
  std::unordered_map<int64_t, int64_t> by_id;  // ids are unique: the reader checked
  by_id.reserve(set.images.size() * 2);
  for (size_t i = 0; i < set.images.size(); ++i) by_id.emplace(set.images[i].id, int64_t(i));
  std::vector<int64_t> owner(set.annotations.size());
  idx.offsets.assign(set.images.size() + 1, 0);
  for (size_t k = 0; k < set.annotations.size(); ++k) {
    owner[k] = by_id.at(set.annotations[k].image_id);
    ++idx.offsets[size_t(owner[k]) + 1];
  }
  for (size_t i = 0; i < set.images.size(); ++i) idx.offsets[i + 1] += idx.offsets[i];
  const size_t n = set.annotations.size();
  idx.bbox.resize(n * 4);
  idx.category.resize(n);
  idx.crowd.resize(n);
  std::vector<int64_t> fill(idx.offsets.begin(), idx.offsets.end() - 1);
  for (size_t k = 0; k < n; ++k) {  // stable: each image keeps the file's order
    const io::CocoAnnotation& a = set.annotations[k];
    const size_t at = size_t(fill[size_t(owner[k])]++);
    for (int j = 0; j < 4; ++j) idx.bbox[at * 4 + size_t(j)] = float(a.bbox[size_t(j)]);
    idx.category[at] = int32_t(a.category_id);  // within int32: the reader checked
    idx.crowd[at] = a.iscrowd ? 1 : 0;
  }
  idx.images = std::move(set.images);
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
  std::string path(int64_t i) const {
    return detail::join_path(dir_, idx_.images[size_t(i)].file_name);
  }
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
  auto node = std::make_shared<CocoNode>(dir, index_coco(annotation_file), opts);
  node->check_options();
  return Dataset(node);
}

}  // namespace spore::data
