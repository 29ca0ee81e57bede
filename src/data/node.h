// DatasetNode: the pipeline node behind a data::Dataset handle. A node is immutable once built
// (its parameters are fixed); each make_iterator() call starts one independent pass over it.
// To add a node: subclass DatasetNode (or UnaryNode / SourceNode) in a new file, implement the
// virtuals (size must be exact), and add a Dataset method or a factory that wraps it.
// Iterators are RowIterators: besides the row, next() records which sample it came from (`id`),
// so an error anywhere downstream can name the source, the index and the file.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "spore/data/dataset.h"

namespace spore::data {

class DatasetNode;

// Which source sample a row came from: source->describe_sample(index) names it.
struct SampleId {
  const DatasetNode* source = nullptr;
  int64_t index = -1;
};
// "[ImageFolderDataset] sample 17 (/data/cat/x.jpg)"; "" when unknown.
std::string describe(const SampleId& id);

class RowIterator : public Iterator {
 public:
  SampleId id;  // of the row the last next() returned
};
using RowIteratorPtr = std::unique_ptr<RowIterator>;

// Iterators keep their node alive (shared_from_this), so an iterator may outlive every handle.
class DatasetNode : public std::enable_shared_from_this<DatasetNode> {
 public:
  virtual ~DatasetNode() = default;
  // One pass over the rows. Called once per epoch; nodes with randomness count their own
  // passes, so pass k of a fresh pipeline is the same whatever happened before.
  virtual RowIteratorPtr make_iterator() = 0;
  virtual int64_t size() const = 0;  // rows per pass (batches after Batch), exact
  virtual std::vector<std::string> column_names() const = 0;
  virtual int64_t batch_size() const { return 1; }
  virtual std::string name() const = 0;  // "MnistDataset", "Batch", ... for error messages
  // Distance from the source (0 for a source): the stage id that seeds per-sample randomness.
  virtual int depth() const { return 0; }
  // For sources: a short description of sample i (its file), "" when there is nothing to add.
  virtual std::string describe_sample(int64_t i) const { return ""; }
};

// A node with one input; size, columns and batch size pass through unless overridden.
class UnaryNode : public DatasetNode {
 public:
  explicit UnaryNode(std::shared_ptr<DatasetNode> child) : child_(std::move(child)) {}
  int64_t size() const override { return child_->size(); }
  std::vector<std::string> column_names() const override { return child_->column_names(); }
  int64_t batch_size() const override { return child_->batch_size(); }
  int depth() const override { return child_->depth() + 1; }
  const std::shared_ptr<DatasetNode>& child() const { return child_; }

 protected:
  std::shared_ptr<DatasetNode> child_;
};

// A random-access source: load(i) for the indices its sampler picks each epoch. Subclasses
// implement num_rows, load (thread-safe when parallel()) and the DatasetNode names.
class SourceNode : public DatasetNode {
 public:
  SourceNode(const SourceOptions& opts, int default_workers)
      : opts_(opts), default_workers_(default_workers) {}
  virtual int64_t num_rows() const = 0;  // rows before sampling
  virtual Row load(int64_t i) const = 0;
  int64_t size() const override;
  RowIteratorPtr make_iterator() override;
  // Validates the options against num_rows(); call at the end of the subclass's factory.
  void check_options() const;
  int workers() const;

 protected:
  SourceOptions opts_;
  int default_workers_;
  std::atomic<int64_t> epoch_{0};
};

// The common source options of any XxxOptions struct (they all end with
// SPORE_DATA_SOURCE_OPTIONS).
template <typename O>
SourceOptions common_options(const O& o) {
  return SourceOptions{o.num_samples,      o.shuffle, o.num_shards,          o.shard_id,
                       o.shard_contiguous, o.sampler, o.num_parallel_workers};
}

// Node factories, one per file; arguments already validated.
std::shared_ptr<DatasetNode> make_map_node(std::shared_ptr<DatasetNode> child,
                                           std::vector<Operation> ops, std::vector<size_t> in_cols,
                                           std::vector<std::string> out_names, int workers);
std::shared_ptr<DatasetNode> make_shuffle_node(std::shared_ptr<DatasetNode> child,
                                               int64_t buffer_size);
std::shared_ptr<DatasetNode> make_batch_node(std::shared_ptr<DatasetNode> child, int64_t batch_size,
                                             BatchOptions opts);
std::shared_ptr<DatasetNode> make_project_node(std::shared_ptr<DatasetNode> child,
                                               std::vector<size_t> cols,
                                               std::vector<std::string> names);
std::shared_ptr<DatasetNode> make_zip_node(std::vector<std::shared_ptr<DatasetNode>> children);
std::shared_ptr<DatasetNode> make_concat_node(std::vector<std::shared_ptr<DatasetNode>> children);
std::shared_ptr<DatasetNode> make_subset_node(std::shared_ptr<DatasetNode> child,
                                              std::vector<int64_t> positions);

// Mixes the global seed, a per-node salt and the pass number into one generator seed.
uint64_t epoch_seed(uint64_t salt, int64_t epoch);
// ["a", "b"]
std::string join_names(const std::vector<std::string>& names);

// -- bad samples ------------------------------------------------------------------------------
// Handles the exception `err` raised while producing sample `id` in stage `stage` (e.g.
// "[Dataset.map] column \"image\", operation 1"; may be ""): with the Skip policy and a
// spore::Error, logs and counts it and returns (the caller drops the sample); otherwise throws
// a spore::Error of the same kind prefixed with describe(id).
void handle_sample_error(const SampleId& id, std::exception_ptr err);
// Rethrows err with describe(id) prefixed (no policy).
[[noreturn]] void throw_with_sample(const SampleId& id, std::exception_ptr err);

}  // namespace spore::data
