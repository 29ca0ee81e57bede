// The Dataset handle's methods and the simple nodes Take, Skip, Repeat. Sources live in
// source.cpp / mnist.cpp / cifar.cpp / image_folder.cpp / coco.cpp / csv.cpp; Map, Shuffle, Batch
// and the combining nodes in their own files. Arguments are checked here, when the pipeline is
// built, so errors point at the call that caused them.
#include <atomic>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/random.h"
#include "data/node.h"
#include "spore/context.h"

namespace spore::data {

uint64_t epoch_seed(uint64_t salt, int64_t epoch) {
  return random::mix(random::mix(get_seed() ^ salt) + uint64_t(epoch));
}

std::string join_names(const std::vector<std::string>& names) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << '"' << names[i] << '"';
  os << "]";
  return os.str();
}

namespace {

std::atomic<int64_t> g_prefetch_size{16};

// -- Take / Skip ----------------------------------------------------------------------------------
class TakeNode : public UnaryNode {
 public:
  TakeNode(std::shared_ptr<DatasetNode> child, int64_t count)
      : UnaryNode(std::move(child)), count_(count) {}
  int64_t size() const override { return std::min(count_, child_->size()); }
  std::string name() const override { return "Take"; }
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      RowIteratorPtr src;
      int64_t left;
      std::optional<Row> next() override {
        if (left <= 0) return std::nullopt;
        --left;
        auto row = src->next();
        id = src->id;
        return row;
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
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      RowIteratorPtr src;
      int64_t to_skip;
      std::optional<Row> next() override {
        for (; to_skip > 0; --to_skip)
          if (!src->next()) return std::nullopt;
        auto row = src->next();
        id = src->id;
        return row;
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
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      std::shared_ptr<DatasetNode> child;
      RowIteratorPtr src;
      int64_t passes_left;
      std::optional<Row> next() override {
        while (true) {
          if (!src) {
            if (passes_left <= 0) return std::nullopt;
            --passes_left;
            src = child->make_iterator();
          }
          if (auto row = src->next()) {
            id = src->id;
            return row;
          }
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

const std::shared_ptr<DatasetNode>& checked(const std::shared_ptr<DatasetNode>& node,
                                            const char* method) {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, node != nullptr, "Dataset.", method,
                   "() called on an undefined (default-constructed) Dataset");
  return node;
}

size_t column_index(const std::vector<std::string>& names, const std::string& name,
                    const char* method) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  SPORE_THROW(ErrorKind::ValueError, "[Dataset.", method, "] no column named \"", name,
              "\"; the dataset's columns are ", join_names(names));
}

void check_unique(const std::vector<std::string>& names, const char* method) {
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      SPORE_CHECK(names[i] != names[j], "[Dataset.", method, "] duplicate column name \"", names[i],
                  "\" in ", join_names(names));
}

}  // namespace

// -- the handle -----------------------------------------------------------------------------------
Dataset Dataset::map(std::vector<Operation> operations, Columns input_columns,
                     Columns output_columns, int num_parallel_workers) const {
  const auto& node = checked(node_, "map");
  const auto names = node->column_names();
  if (input_columns.names.empty()) input_columns.names = {names[0]};
  SPORE_CHECK(!operations.empty(), "[Dataset.map] no operations given for columns ",
              join_names(input_columns.names));
  for (size_t i = 0; i < operations.size(); ++i)
    SPORE_CHECK(bool(operations[i]), "[Dataset.map] operation ", i, " is empty");
  if (num_parallel_workers == 0) num_parallel_workers = default_num_workers();
  SPORE_CHECK(num_parallel_workers >= 1 && num_parallel_workers <= 256,
              "[Dataset.map] num_parallel_workers must be in [1, 256] (or 0 for the default), got ",
              num_parallel_workers);
  std::vector<size_t> in;
  for (const auto& n : input_columns.names) in.push_back(column_index(names, n, "map"));
  check_unique(input_columns.names, "map");
  std::vector<std::string> out =
      output_columns.names.empty() ? input_columns.names : output_columns.names;
  // The output column set must not repeat a name (kept columns plus outputs).
  std::vector<std::string> all = out;
  for (size_t c = 0; c < names.size(); ++c)
    if (std::find(in.begin(), in.end(), c) == in.end()) all.push_back(names[c]);
  check_unique(all, "map");
  return Dataset(make_map_node(node, std::move(operations), std::move(in), std::move(out),
                               num_parallel_workers));
}

Dataset Dataset::map(std::vector<Operation> operations, Columns input_columns,
                     int num_parallel_workers) const {
  return map(std::move(operations), std::move(input_columns), Columns{}, num_parallel_workers);
}

Dataset Dataset::shuffle(int64_t buffer_size) const {
  const auto& node = checked(node_, "shuffle");
  SPORE_CHECK(buffer_size >= 1, "[Dataset.shuffle] buffer_size must be >= 1, got ", buffer_size);
  return Dataset(make_shuffle_node(node, buffer_size));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  return batch(batch_size, BatchOptions{.drop_remainder = drop_remainder});
}

Dataset Dataset::batch(int64_t batch_size, const BatchOptions& opts) const {
  const auto& node = checked(node_, "batch");
  SPORE_CHECK(batch_size >= 1, "[Dataset.batch] batch_size must be >= 1, got ", batch_size);
  const auto names = node->column_names();
  for (const auto& [col, pad] : opts.pad_info) column_index(names, col, "batch");
  for (const auto& col : opts.input_columns) column_index(names, col, "batch");
  SPORE_CHECK(opts.input_columns.empty() || opts.per_batch_map,
              "[Dataset.batch] input_columns given without a per_batch_map");
  return Dataset(make_batch_node(node, batch_size, opts));
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

Dataset Dataset::project(Columns columns) const {
  const auto& node = checked(node_, "project");
  SPORE_CHECK(!columns.names.empty(), "[Dataset.project] no columns given");
  const auto names = node->column_names();
  std::vector<size_t> cols;
  for (const auto& n : columns.names) cols.push_back(column_index(names, n, "project"));
  check_unique(columns.names, "project");
  return Dataset(make_project_node(node, std::move(cols), columns.names));
}

Dataset Dataset::rename(Columns input_columns, Columns output_columns) const {
  const auto& node = checked(node_, "rename");
  SPORE_CHECK(input_columns.names.size() == output_columns.names.size(), "[Dataset.rename] ",
              input_columns.names.size(), " input columns but ", output_columns.names.size(),
              " output names");
  auto names = node->column_names();
  std::vector<size_t> cols(names.size());
  std::iota(cols.begin(), cols.end(), 0);
  auto renamed = names;
  for (size_t k = 0; k < input_columns.names.size(); ++k)
    renamed[column_index(names, input_columns.names[k], "rename")] = output_columns.names[k];
  check_unique(renamed, "rename");
  return Dataset(make_project_node(node, std::move(cols), std::move(renamed)));
}

Dataset zip(const std::vector<Dataset>& datasets) {
  SPORE_CHECK(datasets.size() >= 1, "[zip] needs at least one dataset");
  std::vector<std::shared_ptr<DatasetNode>> nodes;
  std::vector<std::string> all;
  for (const auto& d : datasets) {
    nodes.push_back(checked(d.node(), "zip"));
    for (auto& n : d.node()->column_names()) all.push_back(n);
  }
  check_unique(all, "zip");
  return Dataset(make_zip_node(std::move(nodes)));
}

Dataset concat(const std::vector<Dataset>& datasets) {
  SPORE_CHECK(datasets.size() >= 1, "[concat] needs at least one dataset");
  std::vector<std::shared_ptr<DatasetNode>> nodes;
  const auto names = checked(datasets[0].node(), "concat")->column_names();
  for (size_t k = 0; k < datasets.size(); ++k) {
    nodes.push_back(checked(datasets[k].node(), "concat"));
    SPORE_CHECK(nodes.back()->column_names() == names, "[Dataset.concat] dataset ", k,
                " has columns ", join_names(nodes.back()->column_names()), " but dataset 0 has ",
                join_names(names), "; concatenated datasets need the same columns");
  }
  return Dataset(make_concat_node(std::move(nodes)));
}

Dataset Dataset::zip(const Dataset& other) const { return data::zip({*this, other}); }
Dataset Dataset::concat(const Dataset& other) const { return data::concat({*this, other}); }

namespace {
std::vector<Dataset> split_sizes(const std::shared_ptr<DatasetNode>& node,
                                 const std::vector<int64_t>& sizes, bool randomize) {
  const int64_t n = node->size();
  SPORE_CHECK(!sizes.empty(), "[Dataset.split] no sizes given");
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SPORE_CHECK(sizes[i] >= 1, "[Dataset.split] size ", i, " is ", sizes[i],
                "; sizes must be >= 1");
    total += sizes[i];
  }
  SPORE_CHECK(total == n, "[Dataset.split] the sizes sum to ", total, " but the dataset has ", n,
              " rows");
  // Position p goes to part owner[p]: consecutive blocks, or a seeded random assignment.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (randomize) {
    const uint64_t seed = epoch_seed(0x73706c6974ull, 0);  // "split"
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(order[size_t(i)], order[random::bits(seed, uint64_t(i)) % uint64_t(i + 1)]);
  }
  std::vector<Dataset> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> pos(order.begin() + at, order.begin() + at + s);
    std::sort(pos.begin(), pos.end());
    parts.emplace_back(make_subset_node(node, std::move(pos)));
    at += s;
  }
  return parts;
}

}  // namespace

std::vector<Dataset> Dataset::split(const std::vector<double>& fractions, bool randomize) const {
  const auto& node = checked(node_, "split");
  const int64_t n = node->size();
  SPORE_CHECK(!fractions.empty(), "[Dataset.split] no sizes given");
  bool whole = true;
  for (double f : fractions) whole &= f >= 1 && f == std::floor(f);
  if (whole)
    return split_sizes(node, std::vector<int64_t>(fractions.begin(), fractions.end()), randomize);
  double sum = 0;
  for (size_t i = 0; i < fractions.size(); ++i) {
    SPORE_CHECK(fractions[i] > 0 && fractions[i] <= 1, "[Dataset.split] fraction ", i, " is ",
                fractions[i], "; fractions must be in (0, 1]");
    sum += fractions[i];
  }
  SPORE_CHECK(std::abs(sum - 1) < 1e-6, "[Dataset.split] the fractions sum to ", sum,
              ", expected 1");
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (double f : fractions) total += sizes.emplace_back(int64_t(std::llround(f * double(n))));
  sizes[0] += n - total;  // rounding remainder to the first part (MindSpore)
  return split_sizes(node, sizes, randomize);
}

std::unique_ptr<Iterator> Dataset::create_tuple_iterator() const {
  return checked(node_, "create_tuple_iterator")->make_iterator();
}
std::unique_ptr<DictIterator> Dataset::create_dict_iterator() const {
  const auto& node = checked(node_, "create_dict_iterator");
  return std::make_unique<DictIterator>(node->make_iterator(), node->column_names());
}
int64_t Dataset::get_dataset_size() const { return checked(node_, "get_dataset_size")->size(); }
int64_t Dataset::get_batch_size() const { return checked(node_, "get_batch_size")->batch_size(); }
std::vector<std::string> Dataset::get_column_names() const {
  return checked(node_, "get_column_names")->column_names();
}

void set_prefetch_size(int64_t rows) {
  SPORE_CHECK(rows >= 0 && rows <= 65536, "[set_prefetch_size] expected 0..65536 rows, got ", rows);
  g_prefetch_size = rows;
}
int64_t get_prefetch_size() { return g_prefetch_size; }

}  // namespace spore::data
