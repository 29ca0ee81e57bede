// MnistDataset: MNIST / Fashion-MNIST IDX files (gzipped or raw, both read through zlib's gzread,
// which passes raw files through). Each file is read once into one tensor; rows are views of it.
// IDX layout: big-endian; bytes 0-1 zero, byte 2 the element type (0x08 = ubyte), byte 3 the
// number of dims, then one uint32 per dim, then the data (product of dims bytes), nothing after.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <string>

#include "core/tensor_util.h"
#include "data/node.h"

namespace spore::data {
namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool dir_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The file for `base` in dir: base itself, else base.gz; a clear error when neither exists.
std::string find_file(const std::string& dir, const std::string& base) {
  const std::string raw = join_path(dir, base), gz = raw + ".gz";
  if (file_exists(raw)) return raw;
  if (file_exists(gz)) return gz;
  SPORE_THROW(
      ErrorKind::IOError, "[MnistDataset] missing file ", gz, " (nor ", raw, " uncompressed)",
      dir_exists(dir) ? "" : "; the directory itself does not exist", ". Expected in ", dir,
      ": train-images-idx3-ubyte and train-labels-idx1-ubyte (usage \"train\"), "
      "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (usage \"test\"), each raw or "
      "gzipped (.gz). Fashion-MNIST is the Debian package dataset-fashion-mnist "
      "(apt install dataset-fashion-mnist; its files are in /usr/share/datasets/fashion-mnist)");
}

struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

// Reads up to n bytes; returns how many were read (less only at the end of the file).
size_t read_some(gzFile f, const std::string& path, void* dst, size_t n) {
  size_t got = 0;
  char* p = static_cast<char*>(dst);
  while (got < n) {
    const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 24));
    const int r = gzread(f, p + got, chunk);
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      SPORE_THROW(ErrorKind::IOError, "[MnistDataset] cannot read ", path, ": ",
                  errnum == Z_ERRNO ? std::strerror(errno) : msg,
                  " (is the file a valid gzip or raw IDX file?)");
    }
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

// One IDX file of ubyte data with `ndims` dims, as a uint8 tensor of those dims.
Tensor read_idx(const std::string& path, uint32_t magic_expected, const char* what) {
  GzFile gz;
  gz.f = gzopen(path.c_str(), "rb");
  SPORE_CHECK_KIND(ErrorKind::IOError, gz.f, "[MnistDataset] cannot open ", path, ": ",
                   std::strerror(errno));
  gzbuffer(gz.f, 1 << 17);
  unsigned char head[4];
  const size_t hn = read_some(gz.f, path, head, 4);
  SPORE_CHECK_KIND(ErrorKind::IOError, hn == 4, "[MnistDataset] ", path,
                   " is truncated: expected a 4-byte IDX header, found ", hn, " bytes");
  const uint32_t magic = uint32_t(head[0]) << 24 | uint32_t(head[1]) << 16 |
                         uint32_t(head[2]) << 8 | uint32_t(head[3]);
  char hex[2][16];
  std::snprintf(hex[0], sizeof hex[0], "0x%08x", magic);
  std::snprintf(hex[1], sizeof hex[1], "0x%08x", magic_expected);
  SPORE_CHECK_KIND(ErrorKind::IOError, magic == magic_expected, "[MnistDataset] ", path,
                   ": bad magic number ", hex[0], ", expected ", hex[1], " (IDX ", what,
                   ": ubyte data, ", magic_expected & 0xff, " dims)");
  const int ndims = int(head[3]);
  std::vector<unsigned char> dimbytes(size_t(ndims) * 4);
  const size_t dn = read_some(gz.f, path, dimbytes.data(), dimbytes.size());
  SPORE_CHECK_KIND(ErrorKind::IOError, dn == dimbytes.size(), "[MnistDataset] ", path,
                   " is truncated: expected ", dimbytes.size(), " bytes of dimensions, found ", dn);
  Shape dims;
  for (int d = 0; d < ndims; ++d) {
    const unsigned char* b = &dimbytes[size_t(d) * 4];
    dims.push_back(int64_t(uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 |
                           uint32_t(b[3])));
  }
  // The dims come from the file: the data is read in chunks and the tensor allocated only once
  // that many bytes were there, so a corrupt header cannot ask for more memory than the file
  // holds (three 32-bit dims multiply to up to 2^96; the products are kept in 128 bits).
  unsigned __int128 expected = 1, nonzero = 1;
  for (int64_t d : dims) {
    expected *= uint64_t(d);
    if (d) nonzero *= uint64_t(d);
  }
  // Even with no data (a zero dim), the other dims must make a shape a tensor can describe.
  SPORE_CHECK_KIND(ErrorKind::IOError, nonzero <= uint64_t(INT64_MAX), "[MnistDataset] ", path,
                   ": dims ", shape_str(dims),
                   " are too large for any IDX file; the header is corrupt");
  std::string data;
  constexpr size_t kChunk = size_t(1) << 24;
  while (data.size() < expected) {
    const size_t old = data.size();
    const size_t chunk = size_t(std::min<unsigned __int128>(expected - old, kChunk));
    data.resize(old + chunk);
    const size_t r = read_some(gz.f, path, data.data() + old, chunk);
    data.resize(old + r);
    if (r < chunk) break;
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, data.size() == expected, "[MnistDataset] ", path,
                   " is truncated: dims ", shape_str(dims), " need ", uint64_t(expected),
                   " bytes of data, found ", data.size());
  Tensor t = Tensor::empty(dims, kUInt8);
  if (!data.empty()) std::memcpy(t.data_ptr(), data.data(), data.size());
  const int64_t got = int64_t(data.size());
  data = std::string();
  unsigned char extra[4096];
  size_t more = 0;
  for (size_t r; (r = read_some(gz.f, path, extra, sizeof extra)) > 0;) more += r;
  SPORE_CHECK_KIND(ErrorKind::IOError, more == 0, "[MnistDataset] ", path, ": dims ",
                   shape_str(dims), " need ", got, " bytes of data, found ", got + int64_t(more),
                   " (", more, " bytes of trailing data)");
  return t;
}

struct MnistPart {
  Tensor images;  // (N, H, W) uint8
  Tensor labels;  // (N,) uint8
};

MnistPart read_part(const std::string& dir, const std::string& prefix) {
  // Both paths first, so a missing labels file is reported before a long image read.
  const std::string ip = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string lp = find_file(dir, prefix + "-labels-idx1-ubyte");
  MnistPart p{read_idx(ip, 0x00000803, "images"), read_idx(lp, 0x00000801, "labels")};
  SPORE_CHECK_KIND(ErrorKind::IOError, p.images.shape()[0] == p.labels.shape()[0],
                   "[MnistDataset] ", ip, " holds ", p.images.shape()[0], " images but ", lp,
                   " holds ", p.labels.shape()[0], " labels; the counts must agree");
  return p;
}

class MnistNode : public SourceNode {
 public:
  MnistNode(Tensor images, Tensor labels, const MnistOptions& o)
      : SourceNode(o, 1), images_(std::move(images)), labels_(std::move(labels)) {}
  int64_t num_rows() const override { return images_.shape()[0]; }
  Row load(int64_t r) const override {
    return Row{spore::detail::row_view(images_, r), spore::detail::row_view(labels_, r)};
  }
  std::vector<std::string> column_names() const override { return {"image", "label"}; }
  std::string name() const override { return "MnistDataset"; }

 private:
  Tensor images_;  // (N, H, W, 1) uint8
  Tensor labels_;  // (N,) int32
};

}  // namespace

Dataset MnistDataset(const std::string& dir, const std::string& usage, const MnistOptions& opts) {
  SPORE_CHECK(usage == "train" || usage == "test" || usage == "all",
              "[MnistDataset] usage must be "
              "\"train\", \"test\" or \"all\", got \"",
              usage, "\"");
  SPORE_CHECK(opts.num_samples >= -1,
              "[MnistDataset] num_samples must be >= 0 (or -1 for all), "
              "got ",
              opts.num_samples);
  SPORE_CHECK(opts.num_shards >= 1, "[MnistDataset] num_shards must be >= 1, got ",
              opts.num_shards);
  SPORE_CHECK_INDEX(opts.shard_id >= 0 && opts.shard_id < opts.num_shards,
                    "[MnistDataset] "
                    "shard_id must be in [0, ",
                    opts.num_shards, "), got ", opts.shard_id);
  std::vector<MnistPart> parts;
  if (usage != "test") parts.push_back(read_part(dir, "train"));
  if (usage != "train") parts.push_back(read_part(dir, "t10k"));
  int64_t n = 0;
  for (const auto& p : parts) {
    // The magic numbers fixed the ranks: images (N, H, W), labels (N,).
    SPORE_CHECK(p.images.shape()[1] == parts[0].images.shape()[1] &&
                    p.images.shape()[2] == parts[0].images.shape()[2],
                "[MnistDataset] the train and test images differ in size: ",
                shape_str(parts[0].images.shape()), " vs ", shape_str(p.images.shape()));
    n += p.images.shape()[0];
  }
  const int64_t h = parts[0].images.shape()[1], w = parts[0].images.shape()[2];
  SPORE_CHECK(
      n > 0, "[MnistDataset] the IDX files in ", dir, " (usage '", usage,
      "') hold no images; is the download complete? (Fashion-MNIST has 60000 train and 10000 "
      "test images)");
  SPORE_CHECK(n >= opts.num_shards, "[MnistDataset] ", dir, ": ", n,
              " images cannot be split into ", opts.num_shards, " non-empty shards");
  // (N, H, W, 1) HWC images and int32 labels, the parts one after the other.
  Tensor images = parts.size() == 1 ? parts[0].images : Tensor::empty({n, h, w}, kUInt8);
  Tensor labels = Tensor::empty({n}, kInt32);
  int64_t row = 0;
  for (const auto& p : parts) {
    const int64_t m = p.images.shape()[0];
    if (parts.size() > 1)
      std::memcpy(images.data<uint8_t>() + row * h * w, p.images.data_ptr(), size_t(m * h * w));
    spore::detail::convert_elements(p.labels.data_ptr(), kUInt8, labels.data<int32_t>() + row,
                                    kInt32, m);
    row += m;
  }
  images = spore::detail::make_view(images, {n, h, w, 1}, {h * w, w, 1, 1}, 0);
  auto node = std::make_shared<MnistNode>(std::move(images), std::move(labels), opts);
  node->check_options();
  return Dataset(node);
}

}  // namespace spore::data
