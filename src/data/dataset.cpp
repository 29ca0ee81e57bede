// The Dataset handle's methods, and the simple nodes: TensorDataset (source), Take, Skip, Repeat.
// Map, Shuffle, Batch and MnistDataset live in their own files. Arguments are checked here, when
// the pipeline is built, so errors point at the call that caused them.
#include <atomic>
#include <sstream>

#include "core/random.h"
#include "data/node.h"
#include "data/tensor_util.h"
#include "spore/context.h"

namespace spore::data {

uint64_t epoch_seed(uint64_t salt, int64_t epoch) {
  return random::mix(random::mix(get_seed() ^ salt) + uint64_t(epoch));
}

namespace {

std::atomic<int64_t> g_prefetch_size{2};

std::string join_names(const std::vector<std::string>& names) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << '"' << names[i] << '"';
  os << "]";
  return os.str();
}

// -- TensorDataset --------------------------------------------------------------------------------
class TensorNode : public DatasetNode {
 public:
  TensorNode(std::vector<Tensor> cols, std::vector<std::string> names)
      : cols_(std::move(cols)), names_(std::move(names)) {}
  int64_t size() const override { return cols_[0].shape()[0]; }
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "TensorDataset"; }
  std::unique_ptr<Iterator> make_iterator() override {
    struct It : Iterator {
      std::shared_ptr<const TensorNode> node;
      int64_t i = 0;
      explicit It(std::shared_ptr<const TensorNode> n) : node(std::move(n)) {}
      std::optional<Row> next() override {
        if (i >= node->size()) return std::nullopt;
        Row row;
        for (const Tensor& c : node->cols_) row.push_back(detail::row_view(c, i));
        ++i;
        return row;
      }
    };
    return std::make_unique<It>(std::static_pointer_cast<const TensorNode>(shared_from_this()));
  }

 private:
  std::vector<Tensor> cols_;
  std::vector<std::string> names_;
};

// -- Take / Skip ----------------------------------------------------------------------------------
class TakeNode : public UnaryNode {
 public:
  TakeNode(std::shared_ptr<DatasetNode> child, int64_t count)
      : UnaryNode(std::move(child)), count_(count) {}
  int64_t size() const override { return std::min(count_, child_->size()); }
  std::string name() const override { return "Take"; }
  std::unique_ptr<Iterator> make_iterator() override {
    struct It : Iterator {
      std::unique_ptr<Iterator> src;
      int64_t left;
      std::optional<Row> next() override {
        if (left <= 0) return std::nullopt;
        --left;
        return src->next();
      }
    };
    auto it = std::make_unique<It>();
    it->src = child_->make_iterator();
    it->left = count_;
    return it;
  }

 private:
  int64_t count_;
};

class SkipNode : public UnaryNode {
 public:
  SkipNode(std::shared_ptr<DatasetNode> child, int64_t count)
      : UnaryNode(std::move(child)), count_(count) {}
  int64_t size() const override { return std::max<int64_t>(0, child_->size() - count_); }
  std::string name() const override { return "Skip"; }
  std::unique_ptr<Iterator> make_iterator() override {
    struct It : Iterator {
      std::unique_ptr<Iterator> src;
      int64_t to_skip;
      std::optional<Row> next() override {
        for (; to_skip > 0; --to_skip)
          if (!src->next()) return std::nullopt;
        return src->next();
      }
    };
    auto it = std::make_unique<It>();
    it->src = child_->make_iterator();
    it->to_skip = count_;
    return it;
  }

 private:
  int64_t count_;
};

// -- Repeat: the child's passes back to back (each pass reshuffles its shuffles) ------------------
class RepeatNode : public UnaryNode {
 public:
  RepeatNode(std::shared_ptr<DatasetNode> child, int64_t count)
      : UnaryNode(std::move(child)), count_(count) {}
  int64_t size() const override { return child_->size() * count_; }
  std::string name() const override { return "Repeat"; }
  std::unique_ptr<Iterator> make_iterator() override {
    struct It : Iterator {
      std::shared_ptr<DatasetNode> child;
      std::unique_ptr<Iterator> src;
      int64_t passes_left;
      std::optional<Row> next() override {
        while (true) {
          if (!src) {
            if (passes_left <= 0) return std::nullopt;
            --passes_left;
            src = child->make_iterator();
          }
          if (auto row = src->next()) return row;
          src.reset();
          if (child->size() == 0) return std::nullopt;  // an empty child would loop forever
        }
      }
    };
    auto it = std::make_unique<It>();
    it->child = child_;
    it->passes_left = count_;
    return it;
  }

 private:
  int64_t count_;
};

}  // namespace

// -- the handle -----------------------------------------------------------------------------------
namespace {
const std::shared_ptr<DatasetNode>& checked(const std::shared_ptr<DatasetNode>& node,
                                            const char* method) {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, node != nullptr, "Dataset.", method,
                   "() called on an undefined (default-constructed) Dataset");
  return node;
}
}  // namespace

Dataset Dataset::map(std::vector<TensorOp> operations, const std::string& input_column,
                     int num_parallel_workers) const {
  const auto& node = checked(node_, "map");
  SPORE_CHECK(!operations.empty(), "[Dataset.map] no operations given for column \"", input_column,
              "\"");
  for (size_t i = 0; i < operations.size(); ++i)
    SPORE_CHECK(bool(operations[i]), "[Dataset.map] operation ", i, " is empty");
  SPORE_CHECK(num_parallel_workers >= 1 && num_parallel_workers <= 256,
              "[Dataset.map] num_parallel_workers must be in [1, 256], got ", num_parallel_workers);
  const auto names = node->column_names();
  size_t col = names.size();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == input_column) col = i;
  SPORE_CHECK(col < names.size(), "[Dataset.map] no column named \"", input_column,
              "\"; the dataset's columns are ", join_names(names));
  return Dataset(make_map_node(node, std::move(operations), col, num_parallel_workers));
}

Dataset Dataset::shuffle(int64_t buffer_size) const {
  const auto& node = checked(node_, "shuffle");
  SPORE_CHECK(buffer_size >= 1, "[Dataset.shuffle] buffer_size must be >= 1, got ", buffer_size);
  return Dataset(make_shuffle_node(node, buffer_size));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  const auto& node = checked(node_, "batch");
  SPORE_CHECK(batch_size >= 1, "[Dataset.batch] batch_size must be >= 1, got ", batch_size);
  return Dataset(make_batch_node(node, batch_size, drop_remainder));
}

Dataset Dataset::take(int64_t count) const {
  const auto& node = checked(node_, "take");
  SPORE_CHECK(count >= -1, "[Dataset.take] count must be >= 0 (or -1 for all), got ", count);
  if (count == -1) return *this;
  return Dataset(std::make_shared<TakeNode>(node, count));
}

Dataset Dataset::skip(int64_t count) const {
  const auto& node = checked(node_, "skip");
  SPORE_CHECK(count >= 0, "[Dataset.skip] count must be >= 0, got ", count);
  return Dataset(std::make_shared<SkipNode>(node, count));
}

Dataset Dataset::repeat(int64_t count) const {
  const auto& node = checked(node_, "repeat");
  SPORE_CHECK(count >= 1,
              "[Dataset.repeat] count must be >= 1 (an endless repeat has no exact "
              "size; loop over epochs instead), got ",
              count);
  return Dataset(std::make_shared<RepeatNode>(node, count));
}

std::unique_ptr<Iterator> Dataset::create_tuple_iterator() const {
  return checked(node_, "create_tuple_iterator")->make_iterator();
}
int64_t Dataset::get_dataset_size() const { return checked(node_, "get_dataset_size")->size(); }
int64_t Dataset::get_batch_size() const { return checked(node_, "get_batch_size")->batch_size(); }
std::vector<std::string> Dataset::get_column_names() const {
  return checked(node_, "get_column_names")->column_names();
}

Dataset TensorDataset(std::vector<Tensor> cols, std::vector<std::string> names) {
  SPORE_CHECK(!cols.empty(), "[TensorDataset] needs at least one column");
  SPORE_CHECK(cols.size() == names.size(), "[TensorDataset] ", cols.size(), " columns but ",
              names.size(), " names");
  for (size_t i = 0; i < cols.size(); ++i) {
    SPORE_CHECK(cols[i].defined(), "[TensorDataset] column \"", names[i], "\" is undefined");
    SPORE_CHECK(!cols[i].is_symbolic(), "[TensorDataset] column \"", names[i],
                "\" is a symbolic (traced) tensor; pass a tensor with data");
    SPORE_CHECK(cols[i].device().type == DeviceType::CPU, "[TensorDataset] column \"", names[i],
                "\" is on ", to_string(cols[i].device()), "; dataset columns must be on the CPU");
    SPORE_CHECK(cols[i].dim() >= 1, "[TensorDataset] column \"", names[i],
                "\" is 0-d; columns are sliced along dim 0");
    SPORE_CHECK(cols[i].shape()[0] == cols[0].shape()[0], "[TensorDataset] column \"", names[i],
                "\" has ", cols[i].shape()[0], " rows (shape ", shape_str(cols[i].shape()),
                ") but column \"", names[0], "\" has ", cols[0].shape()[0]);
    for (size_t j = 0; j < i; ++j)
      SPORE_CHECK(names[i] != names[j], "[TensorDataset] duplicate column name \"", names[i], "\"");
  }
  return Dataset(std::make_shared<TensorNode>(std::move(cols), std::move(names)));
}

void set_prefetch_size(int64_t batches) {
  SPORE_CHECK(batches >= 0 && batches <= 1024, "[set_prefetch_size] expected 0..1024 batches, got ",
              batches);
  g_prefetch_size = batches;
}
int64_t get_prefetch_size() { return g_prefetch_size; }

}  // namespace spore::data
