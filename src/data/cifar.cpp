// Cifar10Dataset / Cifar100Dataset: the binary versions. Each file is a sequence of records:
// CIFAR-10 1 label byte + 3072 pixel bytes, CIFAR-100 1 coarse + 1 fine label byte + 3072 pixel
// bytes; pixels are three 32x32 row-major planes (R, G, B). The files are read once at
// construction into one (N, 32, 32, 3) HWC tensor (transposed from the planes) and int32
// labels; rows are views.
#include <cstring>

#include "core/tensor_util.h"
#include "data/file_util.h"
#include "data/node.h"

namespace spore::data {
namespace {

constexpr int64_t kPixels = 32 * 32 * 3;

class CifarNode : public SourceNode {
 public:
  CifarNode(std::string name, Tensor images, std::vector<Tensor> labels,
            std::vector<std::string> cols, const SourceOptions& o)
      : SourceNode(o, 1),
        name_(std::move(name)),
        images_(std::move(images)),
        labels_(std::move(labels)),
        cols_(std::move(cols)) {}
  int64_t num_rows() const override { return images_.shape()[0]; }
  Row load(int64_t i) const override {
    Row row{spore::detail::row_view(images_, i)};
    for (const Tensor& l : labels_) row.push_back(spore::detail::row_view(l, i));
    return row;
  }
  std::vector<std::string> column_names() const override { return cols_; }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Tensor images_;               // (N, 32, 32, 3) uint8
  std::vector<Tensor> labels_;  // (N,) int32 each
  std::vector<std::string> cols_;
};

// label_bytes labels then the pixels per record; labels[k] gets label byte k, which must be below
// classes[k] (a label out of range means another data set or not a CIFAR binary at all; training
// on it would index past the classifier).
Dataset read_cifar(const char* who, const std::string& dir, const std::vector<std::string>& files,
                   const std::vector<int>& classes, std::vector<std::string> cols,
                   const SourceOptions& opts) {
  const int label_bytes = int(classes.size());
  SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_dir(dir), "[", who, "] ", dir,
                   " is not a directory");
  const int64_t record = label_bytes + kPixels;
  std::vector<std::string> data, paths;
  int64_t n = 0;
  for (const auto& f : files) {
    const std::string path = detail::join_path(dir, f);
    paths.push_back(path);
    SPORE_CHECK_KIND(ErrorKind::IOError, detail::is_file(path), "[", who, "] missing file ", path,
                     " (the binary version of the data set is expected in ", dir, ")");
    data.push_back(detail::read_file_string(path, who));
    const int64_t size = int64_t(data.back().size());
    SPORE_CHECK_KIND(ErrorKind::IOError, size % record == 0 && size > 0, "[", who, "] ", path,
                     " is malformed: its size ", size, " bytes is not a whole number of ", record,
                     "-byte records (", size / record, " records and ", size % record,
                     " bytes left over)");
    n += size / record;
  }
  Tensor images = Tensor::empty({n, 32, 32, 3}, kUInt8);
  std::vector<Tensor> labels;
  for (int k = 0; k < label_bytes; ++k) labels.push_back(Tensor::empty({n}, kInt32));
  uint8_t* dst = images.data<uint8_t>();
  int64_t r = 0;
  for (size_t fi = 0; fi < data.size(); ++fi) {
    const std::string& bytes = data[fi];
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    for (int64_t m = int64_t(bytes.size()) / record, q = 0; q < m; ++q, ++r, p += record) {
      for (int k = 0; k < label_bytes; ++k) {
        SPORE_CHECK_KIND(ErrorKind::IOError, p[k] < classes[size_t(k)], "[", who, "] ", paths[fi],
                         ": record ", q, " has ", cols[size_t(k) + 1], " ", int(p[k]),
                         "; expected 0..", classes[size_t(k)] - 1,
                         " (another data set's file, or not a CIFAR binary)");
        labels[size_t(k)].data<int32_t>()[r] = p[k];
      }
      const uint8_t* px = p + label_bytes;  // (3, 32, 32) planes -> (32, 32, 3)
      uint8_t* out = dst + r * kPixels;
      for (int64_t i = 0; i < 1024; ++i) {
        out[i * 3] = px[i];
        out[i * 3 + 1] = px[1024 + i];
        out[i * 3 + 2] = px[2048 + i];
      }
    }
  }
  auto node =
      std::make_shared<CifarNode>(who, std::move(images), std::move(labels), std::move(cols), opts);
  node->check_options();
  return Dataset(node);
}

void check_usage(const char* who, const std::string& usage) {
  SPORE_CHECK(usage == "train" || usage == "test" || usage == "all", "[", who,
              "] usage must be \"train\", \"test\" or \"all\", got \"", usage, "\"");
}

}  // namespace

Dataset Cifar10Dataset(const std::string& dir, const std::string& usage,
                       const SourceOptions& opts) {
  check_usage("Cifar10Dataset", usage);
  std::vector<std::string> files;
  if (usage != "test")
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  if (usage != "train") files.push_back("test_batch.bin");
  return read_cifar("Cifar10Dataset", dir, files, {10}, {"image", "label"}, opts);
}

Dataset Cifar100Dataset(const std::string& dir, const std::string& usage,
                        const SourceOptions& opts) {
  check_usage("Cifar100Dataset", usage);
  std::vector<std::string> files;
  if (usage != "test") files.push_back("train.bin");
  if (usage != "train") files.push_back("test.bin");
  // Byte 0 is the coarse label, byte 1 the fine one; MindSpore's column order is fine, coarse.
  Dataset ds = read_cifar("Cifar100Dataset", dir, files, {20, 100},
                          {"image", "coarse_label", "fine_label"}, opts);
  return ds.project({"image", "fine_label", "coarse_label"});
}

}  // namespace spore::data
