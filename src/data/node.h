// DatasetNode: the pipeline node behind a data::Dataset handle. A node is immutable once built
// (its parameters are fixed); each make_iterator() call starts one independent pass over it.
// To add a node: subclass DatasetNode in a new file, implement the four virtuals (size must be
// exact), and add a Dataset method or a factory that wraps it in a Dataset.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spore/data/dataset.h"

namespace spore::data {

// Iterators keep their node alive (shared_from_this), so an iterator may outlive every handle.
class DatasetNode : public std::enable_shared_from_this<DatasetNode> {
 public:
  virtual ~DatasetNode() = default;
  // One pass over the rows. Called once per epoch; nodes with randomness (shuffle) count their
  // own passes, so pass k of a fresh pipeline is the same whatever happened before.
  virtual std::unique_ptr<Iterator> make_iterator() = 0;
  virtual int64_t size() const = 0;  // rows per pass (batches after Batch), exact
  virtual std::vector<std::string> column_names() const = 0;
  virtual int64_t batch_size() const { return 1; }
  virtual std::string name() const = 0;  // "MnistDataset", "Batch", ... for error messages
};

// A node with one input; size, columns and batch size pass through unless overridden.
class UnaryNode : public DatasetNode {
 public:
  explicit UnaryNode(std::shared_ptr<DatasetNode> child) : child_(std::move(child)) {}
  int64_t size() const override { return child_->size(); }
  std::vector<std::string> column_names() const override { return child_->column_names(); }
  int64_t batch_size() const override { return child_->batch_size(); }
  const std::shared_ptr<DatasetNode>& child() const { return child_; }

 protected:
  std::shared_ptr<DatasetNode> child_;
};

// Node factories, one per file (map.cpp, shuffle.cpp, batch.cpp); arguments already validated.
std::shared_ptr<DatasetNode> make_map_node(std::shared_ptr<DatasetNode> child,
                                           std::vector<TensorOp> ops, size_t column, int workers);
std::shared_ptr<DatasetNode> make_shuffle_node(std::shared_ptr<DatasetNode> child,
                                               int64_t buffer_size);
std::shared_ptr<DatasetNode> make_batch_node(std::shared_ptr<DatasetNode> child, int64_t batch_size,
                                             bool drop_remainder);

// Mixes the global seed, a per-node salt and the pass number into one generator seed.
uint64_t epoch_seed(uint64_t salt, int64_t epoch);

}  // namespace spore::data
