// The dataset pipeline handle (mindspore.dataset's role). A Dataset is a cheap, copyable handle on
// a pipeline node; map/shuffle/batch/take/... return new handles, so pipelines chain:
//   auto ds = data::MnistDataset(dir, "train").map({vision::Rescale(1 / 255.0)}, "image")
//                 .shuffle(10000).batch(64);
//   for (auto it = ds.create_tuple_iterator(); auto row = it->next();) { (*row)[0] ... }
// Each create_tuple_iterator() / create_dict_iterator() is one pass (epoch); shuffles and random
// samplers reshuffle every epoch from the global seed (spore::set_seed).
// Execution: sources that decode files and map() run on worker threads (num_parallel_workers;
// 0 = min(8, hardware threads)); stages are joined by bounded queues (set_prefetch_size rows),
// output order never depends on thread timing, and random transforms draw from
// data::sample_rng(), seeded per sample, so the output is the same for any worker count.
// Errors in a sample (a corrupt image, a failing transform) reach the consumer's next() as a
// spore::Error naming the source, the sample index and its file: "[ImageFolderDataset] sample 17
// (/data/cat/x.jpg): ...". set_error_policy(ErrorPolicy::Skip) drops such samples instead.
// Sources are declared at the bottom; samplers in spore/data/samplers.h.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "spore/data/samplers.h"
#include "spore/tensor.h"

namespace spore::data {

using Row = std::vector<Tensor>;  // one tensor per column

class Iterator {
 public:
  virtual ~Iterator() = default;
  virtual std::optional<Row> next() = 0;  // nullopt at the end of the epoch
};

// Rows as {column name: tensor} (MindSpore's create_dict_iterator).
class DictIterator {
 public:
  DictIterator(std::unique_ptr<Iterator> it, std::vector<std::string> names)
      : it_(std::move(it)), names_(std::move(names)) {}
  std::optional<std::map<std::string, Tensor>> next();

 private:
  std::unique_ptr<Iterator> it_;
  std::vector<std::string> names_;
};

// A transform applied to one column of one row (vision::Rescale, HWC2CHW, ...).
using TensorOp = std::function<Tensor(const Tensor&)>;
// A transform of several columns: gets the current columns in order, returns the new ones.
using RowOp = std::function<Row(const Row&)>;

// One map() operation: a TensorOp (exactly one column in, one out) or a RowOp (any number).
class Operation {
 public:
  Operation(TensorOp op) : op_(std::move(op)) {}  // NOLINT: implicit on purpose
  Operation(RowOp op) : op_(std::move(op)) {}     // NOLINT
  template <typename F>
  requires(!std::same_as<std::decay_t<F>, Operation> &&
           std::is_invocable_r_v<Tensor, F, const Tensor&> &&
           !std::is_invocable_r_v<Row, F, const Row&>) Operation(F f)
      : op_(TensorOp(std::move(f))) {}  // NOLINT
  template <typename F>
  requires(!std::same_as<std::decay_t<F>, Operation> && std::is_invocable_r_v<Row, F, const Row&> &&
           !std::is_invocable_r_v<Tensor, F, const Tensor&>) Operation(F f)
      : op_(RowOp(std::move(f))) {}  // NOLINT
  bool is_tensor_op() const { return op_.index() == 0; }
  const TensorOp& tensor_op() const { return std::get<0>(op_); }
  const RowOp& row_op() const { return std::get<1>(op_); }
  explicit operator bool() const { return is_tensor_op() ? bool(tensor_op()) : bool(row_op()); }

 private:
  std::variant<TensorOp, RowOp> op_;
};

// A list of column names that also accepts one name: "image" or {"image", "bbox"}.
struct Columns {
  std::vector<std::string> names;
  Columns() = default;
  Columns(const char* name) : names{name} {}                    // NOLINT
  Columns(std::string name) : names{std::move(name)} {}         // NOLINT
  Columns(std::vector<std::string> n) : names(std::move(n)) {}  // NOLINT
  Columns(std::initializer_list<std::string> n) : names(n) {}   // NOLINT
};

// Padding of one column in batch(): shape entries -1 (or an empty shape) pad to the batch's
// largest size in that dim; `value` fills the new elements.
struct PadInfo {
  std::vector<int64_t> shape;
  double value = 0;
};
struct BatchInfo {
  int64_t batch_num = 0;  // index of the batch in the epoch
  int64_t epoch_num = 0;
};
// per_batch_map: columns[c][i] is sample i of input column c; returns the same layout (any
// number of samples and shapes, as long as each output column can then be stacked).
using BatchMap = std::function<std::vector<std::vector<Tensor>>(
    std::vector<std::vector<Tensor>> columns, const BatchInfo& info)>;
struct BatchOptions {
  bool drop_remainder = false;
  BatchMap per_batch_map = {};
  std::vector<std::string> input_columns = {};  // per_batch_map's columns; empty: all
  // Columns to pad to a common shape (MindSpore's pad_info); pad_all pads every column.
  std::map<std::string, PadInfo> pad_info = {};
  bool pad_all = false;
};

class DatasetNode;  // implementation (src/data/)

class Dataset {
 public:
  Dataset() = default;
  explicit Dataset(std::shared_ptr<DatasetNode> node) : node_(std::move(node)) {}

  // Runs the operations in turn on input_columns (default: the first column); the last one's
  // outputs become output_columns (default: the input names), placed where the inputs were.
  // num_parallel_workers 0: min(8, hardware threads).
  Dataset map(std::vector<Operation> operations, Columns input_columns = {},
              Columns output_columns = {}, int num_parallel_workers = 0) const;
  Dataset map(std::vector<Operation> operations, Columns input_columns,
              int num_parallel_workers) const;
  Dataset shuffle(int64_t buffer_size) const;
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset batch(int64_t batch_size, const BatchOptions& opts) const;
  Dataset take(int64_t count) const;
  Dataset skip(int64_t count) const;
  Dataset repeat(int64_t count) const;
  Dataset project(Columns columns) const;  // keeps these columns, in this order
  Dataset rename(Columns input_columns, Columns output_columns) const;
  Dataset zip(const Dataset& other) const;     // columns side by side; the shorter size
  Dataset concat(const Dataset& other) const;  // rows of this, then of other (same columns)
  Dataset operator+(const Dataset& other) const { return concat(other); }
  // Splits the rows into parts: `sizes` all whole numbers >= 1 are row counts (summing to the
  // size), otherwise fractions (summing to 1; rounding remainders go to the first part), as
  // MindSpore's list of ints / list of floats. randomize: rows drawn at random (seeded once, at
  // the split), else consecutive. Each part keeps the child's row order.
  std::vector<Dataset> split(const std::vector<double>& sizes, bool randomize = true) const;
  std::unique_ptr<Iterator> create_tuple_iterator() const;  // one epoch
  std::unique_ptr<DictIterator> create_dict_iterator() const;
  // Rows per epoch (batches after batch()), exact (except samples dropped by the skip policy).
  int64_t get_dataset_size() const;
  int64_t get_batch_size() const;  // 1 when not batched
  std::vector<std::string> get_column_names() const;
  std::vector<std::string> get_col_names() const { return get_column_names(); }
  bool defined() const { return node_ != nullptr; }
  const std::shared_ptr<DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<DatasetNode> node_;
};

Dataset zip(const std::vector<Dataset>& datasets);
Dataset concat(const std::vector<Dataset>& datasets);

// -- sources ------------------------------------------------------------------------------------
// Every source takes these options (in this order, after its own): num_samples caps the rows
// per epoch (-1: all); shuffle permutes them every epoch; num_shards / shard_id keep one shard
// (floor(rows / num_shards) rows, strided; shard_contiguous: one block of consecutive rows);
// a sampler replaces shuffle and sharding; num_parallel_workers loads (decodes) samples on that
// many threads (0: min(8, hardware threads) for file sources, 1 for in-memory ones). Unlike
// MindSpore, shuffle defaults to false, so a plain source is read in order.
#define SPORE_DATA_SOURCE_OPTIONS         \
  int64_t num_samples = -1;               \
  bool shuffle = false;                   \
  int64_t num_shards = 1, shard_id = 0;   \
  bool shard_contiguous = false;          \
  ::spore::data::SamplerPtr sampler = {}; \
  int num_parallel_workers = 0

struct SourceOptions {
  SPORE_DATA_SOURCE_OPTIONS;
};

// MNIST / Fashion-MNIST IDX files (gzipped or not) in `dir`; usage "train" | "test" | "all".
// Columns: "image" uint8 (28, 28, 1) HWC, "label" int32 scalar (MindSpore: uint32).
using MnistOptions = SourceOptions;
Dataset MnistDataset(const std::string& dir, const std::string& usage = "train",
                     const MnistOptions& opts = {});

// CIFAR-10 binary files in dir (data_batch_1..5.bin for "train", test_batch.bin for "test";
// "all": both). Columns "image" uint8 (32, 32, 3) HWC, "label" int32.
Dataset Cifar10Dataset(const std::string& dir, const std::string& usage = "train",
                       const SourceOptions& opts = {});
// CIFAR-100 (train.bin / test.bin). Columns "image", "fine_label", "coarse_label" (int32).
Dataset Cifar100Dataset(const std::string& dir, const std::string& usage = "train",
                        const SourceOptions& opts = {});

// One folder per class under dir (sorted names -> labels 0, 1, ...; class_indexing picks and
// labels the folders instead); each class's files sorted by name. extensions (e.g. {".jpg",
// ".png"}, case-insensitive; empty: every file not starting with '.'). Columns "image" (decode:
// uint8 (H, W, 3) RGB via OpenCV; else the file's bytes, uint8 (nbytes,)) and "label" int32.
struct ImageFolderOptions {
  std::vector<std::string> extensions = {};
  std::map<std::string, int> class_indexing = {};
  bool decode = false;
  SPORE_DATA_SOURCE_OPTIONS;
};
Dataset ImageFolderDataset(const std::string& dir, const ImageFolderOptions& opts = {});

// COCO detection: images under dir, annotations from the JSON annotation_file (parsed with
// simdjson). Columns "image" (as ImageFolder's), "bbox" float32 (K, 4) [x, y, w, h],
// "category_id" int32 (K, 1), "iscrowd" int32 (K, 1) (MindSpore: uint32). Images without
// annotations are kept (K = 0). Rows follow the order of the file's "images" list.
struct CocoOptions {
  std::string task = "Detection";
  bool decode = false;
  SPORE_DATA_SOURCE_OPTIONS;
};
Dataset CocoDataset(const std::string& dir, const std::string& annotation_file,
                    const CocoOptions& opts = {});

// CSV files (RFC 4180 quoting: "a ""quoted"", field"; line breaks inside quotes). column_names
// empty: the first line of the first file names the columns (and each file's first line is a
// header). column_defaults gives each column's type and the value of an empty field: an int64_t
// default makes an int32 scalar column, a double a float32 one, a string a text column (its
// UTF-8 bytes as uint8 (nbytes,)); columns without a default are text.
using CsvValue = std::variant<int64_t, double, std::string>;
struct CSVOptions {
  std::vector<std::string> column_names = {};
  char field_delim = ',';
  std::vector<CsvValue> column_defaults = {};
  SPORE_DATA_SOURCE_OPTIONS;
};
Dataset CSVDataset(const std::vector<std::string>& files, const CSVOptions& opts = {});

// Rows from in-memory tensors: column i is cols[i] sliced along dim 0.
Dataset TensorDataset(std::vector<Tensor> cols, std::vector<std::string> names);
inline Dataset NumpySlicesDataset(std::vector<Tensor> cols, std::vector<std::string> names) {
  return TensorDataset(std::move(cols), std::move(names));
}

// GeneratorDataset. Random access: fn(i) for i in [0, size) (thread-safe when
// num_parallel_workers > 1; default 1), or any object with size() and operator[](i) returning a
// Row. Iterable: make_generator() starts a pass and returns a function giving the next row or
// nullopt; the size is counted by running one pass; samplers, shuffle and shards need random
// access.
using GeneratorOptions = SourceOptions;
Dataset GeneratorDataset(std::function<Row(int64_t)> fn, int64_t size,
                         std::vector<std::string> column_names, const GeneratorOptions& opts = {});
Dataset GeneratorDataset(std::function<std::function<std::optional<Row>()>()> make_generator,
                         std::vector<std::string> column_names, const GeneratorOptions& opts = {});
template <typename Source>
requires requires(const Source& s, int64_t i) {
  { s.size() } -> std::convertible_to<int64_t>;
  { s[i] } -> std::convertible_to<Row>;
}
Dataset GeneratorDataset(Source source, std::vector<std::string> column_names,
                         const GeneratorOptions& opts = {}) {
  auto src = std::make_shared<const Source>(std::move(source));
  const int64_t n = int64_t(src->size());
  return GeneratorDataset(
      std::function<Row(int64_t)>([src](int64_t i) -> Row { return (*src)[i]; }), n,
      std::move(column_names), opts);
}

// -- execution settings -------------------------------------------------------------------------
// Rows queued ahead by each parallel stage (MindSpore's config.set_prefetch_size); batch() keeps
// max(2, prefetch / batch_size) batches ready on a background thread; 0 turns that thread off.
// Default 16.
void set_prefetch_size(int64_t rows);
int64_t get_prefetch_size();
// What a bad sample (unreadable file, corrupt image, failing transform) does: Raise (default)
// stops the pipeline with the error; Skip drops the sample, logs one stderr line and counts it.
enum class ErrorPolicy { Raise, Skip };
void set_error_policy(ErrorPolicy policy);
ErrorPolicy get_error_policy();
int64_t get_skipped_count();  // samples dropped by the Skip policy since the last reset
void reset_skipped_count();
// Default workers for a stage: min(8, hardware threads).
int default_num_workers();

}  // namespace spore::data

namespace spore::vision {
data::TensorOp Rescale(double rescale, double shift = 0);  // x * rescale + shift, as float32
data::TensorOp HWC2CHW();
data::TensorOp Normalize(std::vector<double> mean, std::vector<double> std);  // on CHW float
}  // namespace spore::vision
