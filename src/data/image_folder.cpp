// ImageFolderDataset: one folder per class under a root; label = the class's index in the sorted
// folder names (or class_indexing). Files are listed once, at construction; each sample is read
// (and decoded) on a source worker, so decoding runs in parallel and a bad file is reported as
// "[ImageFolderDataset] sample i (path): reason".
#include <algorithm>
#include <cctype>

#include "data/file_util.h"
#include "data/node.h"
#include "spore/data/vision.h"

namespace spore::data {

namespace detail {
Tensor load_image(const std::string& path, bool decode, const char* who) {
  Tensor bytes = read_file_bytes(path, who);
  if (!decode) return bytes;
  SPORE_CHECK_KIND(ErrorKind::IOError, bytes.numel() > 0, "[", who, "] ", path, " is empty");
  static const TensorOp decoder = vision::Decode();
  return decoder(bytes);
}
}  // namespace detail

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class ImageFolderNode : public SourceNode {
 public:
  ImageFolderNode(std::vector<std::string> files, std::vector<int32_t> labels,
                  const ImageFolderOptions& o)
      : SourceNode(common_options(o), default_num_workers()),
        files_(std::move(files)),
        labels_(std::move(labels)),
        decode_(o.decode) {}
  int64_t num_rows() const override { return int64_t(files_.size()); }
  Row load(int64_t i) const override {
    Tensor label = Tensor::empty({}, kInt32);
    *label.data<int32_t>() = labels_[size_t(i)];
    return {detail::load_image(files_[size_t(i)], decode_, "ImageFolderDataset"), label};
  }
  std::vector<std::string> column_names() const override { return {"image", "label"}; }
  std::string name() const override { return "ImageFolderDataset"; }
  std::string describe_sample(int64_t i) const override {
    return i >= 0 && i < num_rows() ? files_[size_t(i)] : "";
  }

 private:
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
  bool decode_;
};

}  // namespace

Dataset ImageFolderDataset(const std::string& dir, const ImageFolderOptions& opts) {
  const char* who = "ImageFolderDataset";
  SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_dir(dir), "[ImageFolderDataset] ", dir,
                   " is not a directory (expected one sub-folder per class)");
  std::vector<std::pair<std::string, int>> classes;
  if (opts.class_indexing.empty()) {
    int k = 0;
    for (const auto& name : detail::list_dir(dir, true, who)) classes.push_back({name, k++});
  } else {
    for (const auto& [name, label] : opts.class_indexing) {
      SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_dir(detail::join_path(dir, name)),
                       "[ImageFolderDataset] class_indexing names \"", name, "\" but ",
                       detail::join_path(dir, name), " is not a directory");
      classes.push_back({name, label});
    }
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, !classes.empty(), "[ImageFolderDataset] ", dir,
                   " has no class sub-folders");
  std::vector<std::string> exts;
  for (const auto& e : opts.extensions) exts.push_back(lower(e));
  std::vector<std::string> files;
  std::vector<int32_t> labels;
  for (const auto& [name, label] : classes) {
    const std::string cdir = detail::join_path(dir, name);
    for (const auto& f : detail::list_dir(cdir, false, who)) {
      if (!exts.empty()) {
        const std::string lf = lower(f);
        bool ok = false;
        for (const auto& e : exts)
          ok |= lf.size() >= e.size() && lf.compare(lf.size() - e.size(), e.size(), e) == 0;
        if (!ok) continue;
      }
      files.push_back(detail::join_path(cdir, f));
      labels.push_back(int32_t(label));
    }
  }
  std::string ext_list;
  for (const auto& e : opts.extensions) ext_list += (ext_list.empty() ? "" : ", ") + e;
  SPORE_CHECK_KIND(ErrorKind::IOError, !files.empty(),
                   "[ImageFolderDataset] no files found in the ", classes.size(),
                   " class folders of ", dir,
                   ext_list.empty() ? std::string() : " with extensions " + ext_list);
  auto node = std::make_shared<ImageFolderNode>(std::move(files), std::move(labels), opts);
  node->check_options();
  return Dataset(node);
}

}  // namespace spore::data
