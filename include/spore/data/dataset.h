// The dataset pipeline handle (mindspore.dataset's role). A Dataset is a cheap, copyable handle on
// a pipeline node; map/shuffle/batch/take return new handles, so pipelines chain:
//   auto ds = data::MnistDataset(dir, "train").map({vision::Rescale(1 / 255.0)}, "image")
//                 .shuffle(10000).batch(64);
//   for (auto it = ds.create_tuple_iterator(); auto row = it->next();) { (*row)[0] ... }
// Each create_tuple_iterator() is one pass (epoch); shuffling reshuffles every epoch from the seed.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore::data {

using Row = std::vector<Tensor>;  // one tensor per column

class Iterator {
 public:
  virtual ~Iterator() = default;
  virtual std::optional<Row> next() = 0;  // nullopt at the end of the epoch
};

// A transform applied to one column of one row (vision::Rescale, HWC2CHW, ...).
using TensorOp = std::function<Tensor(const Tensor&)>;

class DatasetNode;  // implementation (src/data/)

class Dataset {
 public:
  Dataset() = default;
  explicit Dataset(std::shared_ptr<DatasetNode> node) : node_(std::move(node)) {}

  Dataset map(std::vector<TensorOp> operations, const std::string& input_column,
              int num_parallel_workers = 1) const;
  Dataset shuffle(int64_t buffer_size) const;
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset take(int64_t count) const;
  Dataset skip(int64_t count) const;
  Dataset repeat(int64_t count) const;

  std::unique_ptr<Iterator> create_tuple_iterator() const;  // one epoch
  int64_t get_dataset_size() const;                         // rows (batches after batch())
  int64_t get_batch_size() const;                           // 1 when not batched
  std::vector<std::string> get_column_names() const;
  bool defined() const { return node_ != nullptr; }
  const std::shared_ptr<DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<DatasetNode> node_;
};

// MNIST / Fashion-MNIST IDX files (gzipped or not) in `dir`; usage "train" | "test" | "all".
// Columns: "image" uint8 (28, 28, 1) HWC, "label" int32 scalar (MindSpore: uint32).
struct MnistOptions {
  int64_t num_samples = -1;  // -1: all
  bool shuffle = false;
  int64_t num_shards = 1, shard_id = 0;
  // Shards have equal sizes (floor(rows / num_shards); the remainder is dropped). Strided (the
  // default, like MindSpore's DistributedSampler): shard k holds rows k, k + num_shards, ...;
  // contiguous: shard k holds one block of consecutive rows.
  bool shard_contiguous = false;
};
Dataset MnistDataset(const std::string& dir, const std::string& usage = "train",
                     const MnistOptions& opts = {});
// Rows from in-memory tensors: column i is cols[i] sliced along dim 0.
Dataset TensorDataset(std::vector<Tensor> cols, std::vector<std::string> names);

// Batches prepared ahead by Batch's background thread (MindSpore's config.set_prefetch_size);
// 0 turns the thread off (batches are then built on the caller's thread). Default 2.
void set_prefetch_size(int64_t batches);
int64_t get_prefetch_size();

}  // namespace spore::data

namespace spore::vision {
data::TensorOp Rescale(double rescale, double shift = 0);  // x * rescale + shift, as float32
data::TensorOp HWC2CHW();
data::TensorOp Normalize(std::vector<double> mean, std::vector<double> std);  // on CHW float
}  // namespace spore::vision
