// SourceNode (random-access sources: the epoch's indices from the sampler or the common options,
// then load(i) inline or on an OrderedPool of workers), and the in-memory sources:
// TensorDataset and GeneratorDataset (random-access and iterable forms).
#include <mutex>
#include <numeric>

#include "core/random.h"
#include "core/tensor_util.h"
#include "data/executor.h"
#include "data/node.h"

namespace spore::data {

namespace {
uint64_t name_salt(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

int SourceNode::workers() const {
  return opts_.num_parallel_workers > 0 ? opts_.num_parallel_workers : default_workers_;
}

int64_t SourceNode::size() const {
  const int64_t n = num_rows();
  const int64_t m = opts_.sampler ? opts_.sampler->size(n) : n / opts_.num_shards;
  return opts_.num_samples < 0 ? m : std::min(m, opts_.num_samples);
}

void SourceNode::check_options() const {
  const std::string who = name();
  SPORE_CHECK(opts_.num_samples >= -1, "[", who, "] num_samples must be >= 0 (or -1 for all), got ",
              opts_.num_samples);
  SPORE_CHECK(opts_.num_shards >= 1, "[", who, "] num_shards must be >= 1, got ", opts_.num_shards);
  SPORE_CHECK_INDEX(opts_.shard_id >= 0 && opts_.shard_id < opts_.num_shards, "[", who,
                    "] shard_id must be in [0, ", opts_.num_shards, "), got ", opts_.shard_id);
  SPORE_CHECK(opts_.num_parallel_workers >= 0 && opts_.num_parallel_workers <= 256, "[", who,
              "] num_parallel_workers must be in [0, 256], got ", opts_.num_parallel_workers);
  if (opts_.sampler) {
    SPORE_CHECK(opts_.num_shards == 1 && !opts_.shuffle, "[", who,
                "] give either a sampler or shuffle / num_shards, not both (use "
                "DistributedSampler(num_shards, shard_id, shuffle) to shard with a sampler)");
    opts_.sampler->check(num_rows(), who);
  } else {
    SPORE_CHECK(num_rows() >= opts_.num_shards || num_rows() == 0, "[", who, "] ", num_rows(),
                " rows cannot be split into ", opts_.num_shards, " non-empty shards");
  }
}

RowIteratorPtr SourceNode::make_iterator() {
  const int64_t epoch = epoch_++;
  const int64_t n = num_rows();
  const uint64_t seed = epoch_seed(name_salt(name()), epoch);
  std::vector<int64_t> idx;
  if (opts_.sampler) {
    idx = opts_.sampler->indices(n, seed);
  } else {
    // The whole epoch's order is permuted the same way in every shard (same seed), then cut
    // into shards, so shards stay disjoint in every epoch.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    if (opts_.shuffle)
      for (int64_t i = n - 1; i > 0; --i)
        std::swap(order[size_t(i)], order[random::bits(seed, uint64_t(i)) % uint64_t(i + 1)]);
    const int64_t per_shard = n / opts_.num_shards;
    idx.resize(size_t(per_shard));
    for (int64_t k = 0; k < per_shard; ++k) {
      const int64_t pos = opts_.shard_contiguous ? opts_.shard_id * per_shard + k
                                                 : opts_.shard_id + k * opts_.num_shards;
      idx[size_t(k)] = order[size_t(pos)];
    }
  }
  if (opts_.num_samples >= 0 && int64_t(idx.size()) > opts_.num_samples)
    idx.resize(size_t(opts_.num_samples));

  struct It : RowIterator {
    std::shared_ptr<const SourceNode> node;
    std::vector<int64_t> idx;
    size_t ncols = 0;
    std::unique_ptr<detail::OrderedPool> pool;  // last: destroyed (joined) first
    std::optional<Row> next() override {
      auto t = pool->next();
      if (!t) return std::nullopt;
      id = t->id;
      return std::move(t->row);
    }
  };
  auto it = std::make_unique<It>();
  it->node = std::static_pointer_cast<const SourceNode>(shared_from_this());
  it->idx = std::move(idx);
  it->ncols = column_names().size();
  It* self = it.get();
  const int w = workers();
  it->pool = std::make_unique<detail::OrderedPool>(
      w <= 1 ? 0 : w, get_prefetch_size(),
      [self](int64_t seq, detail::Task& t) {
        if (size_t(seq) >= self->idx.size()) return false;
        t.index = self->idx[size_t(seq)];
        t.id = SampleId{self->node.get(), t.index};
        return true;
      },
      [self](int64_t, detail::Task& t) {
        try {
          Row row = self->node->load(t.index);
          SPORE_CHECK(row.size() == self->ncols, "returned ", row.size(), " columns, expected ",
                      self->ncols, " (", join_names(self->node->column_names()), ")");
          for (size_t c = 0; c < row.size(); ++c)
            SPORE_CHECK(row[c].defined() && !row[c].is_symbolic(), "column ", c,
                        " is an undefined or symbolic tensor");
          t.row = std::move(row);
        } catch (...) {
          handle_sample_error(t.id, std::current_exception());
          t.skipped = true;
        }
      },
      "source");
  return it;
}

namespace {

// -- TensorDataset --------------------------------------------------------------------------------
class TensorNode : public SourceNode {
 public:
  TensorNode(std::vector<Tensor> cols, std::vector<std::string> names)
      : SourceNode({}, 1), cols_(std::move(cols)), names_(std::move(names)) {}
  int64_t num_rows() const override { return cols_[0].shape()[0]; }
  Row load(int64_t i) const override {
    Row row;
    row.reserve(cols_.size());
    for (const Tensor& c : cols_) row.push_back(spore::detail::row_view(c, i));
    return row;
  }
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "TensorDataset"; }

 private:
  std::vector<Tensor> cols_;
  std::vector<std::string> names_;
};

// -- GeneratorDataset, random access --------------------------------------------------------------
class GeneratorNode : public SourceNode {
 public:
  GeneratorNode(std::function<Row(int64_t)> fn, int64_t n, std::vector<std::string> names,
                const SourceOptions& o)
      : SourceNode(o, 1), fn_(std::move(fn)), n_(n), names_(std::move(names)) {}
  int64_t num_rows() const override { return n_; }
  Row load(int64_t i) const override { return fn_(i); }
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "GeneratorDataset"; }

 private:
  std::function<Row(int64_t)> fn_;
  int64_t n_;
  std::vector<std::string> names_;
};

// -- GeneratorDataset, iterable -------------------------------------------------------------------
class IterableNode : public DatasetNode {
 public:
  using Gen = std::function<std::optional<Row>()>;
  IterableNode(std::function<Gen()> make, std::vector<std::string> names, int64_t num_samples)
      : make_(std::move(make)), names_(std::move(names)), num_samples_(num_samples) {}
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "GeneratorDataset"; }
  int64_t size() const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (size_ < 0) {  // one pass to count (MindSpore does the same for iterables)
      Gen g = make_();
      int64_t n = 0;
      while ((num_samples_ < 0 || n < num_samples_) && g()) ++n;
      size_ = n;
    }
    return size_;
  }
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      std::shared_ptr<const IterableNode> node;
      Gen gen;
      int64_t i = 0;
      std::optional<Row> next() override {
        if (node->num_samples_ >= 0 && i >= node->num_samples_) return std::nullopt;
        id = SampleId{node.get(), i};
        std::optional<Row> row;
        try {
          row = gen();
          if (row)
            SPORE_CHECK(row->size() == node->names_.size(), "returned ", row->size(),
                        " columns, expected ", node->names_.size(), " (", join_names(node->names_),
                        ")");
        } catch (...) {
          throw_with_sample(id, std::current_exception());
        }
        ++i;
        return row;
      }
    };
    auto it = std::make_unique<It>();
    it->node = std::static_pointer_cast<const IterableNode>(shared_from_this());
    it->gen = make_();
    SPORE_CHECK(bool(it->gen), "[GeneratorDataset] make_generator returned an empty function");
    return it;
  }

 private:
  std::function<Gen()> make_;
  std::vector<std::string> names_;
  int64_t num_samples_;
  mutable std::mutex mu_;
  mutable int64_t size_ = -1;
};

void check_names(const std::vector<std::string>& names, const char* who) {
  SPORE_CHECK(!names.empty(), "[", who, "] column_names is empty");
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      SPORE_CHECK(names[i] != names[j], "[", who, "] duplicate column name \"", names[i], "\"");
}

}  // namespace

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
  }
  check_names(names, "TensorDataset");
  return Dataset(std::make_shared<TensorNode>(std::move(cols), std::move(names)));
}

Dataset GeneratorDataset(std::function<Row(int64_t)> fn, int64_t size,
                         std::vector<std::string> column_names, const GeneratorOptions& opts) {
  SPORE_CHECK(bool(fn), "[GeneratorDataset] the source function is empty");
  SPORE_CHECK(size >= 0, "[GeneratorDataset] size must be >= 0, got ", size);
  check_names(column_names, "GeneratorDataset");
  auto node = std::make_shared<GeneratorNode>(std::move(fn), size, std::move(column_names), opts);
  node->check_options();
  return Dataset(node);
}

Dataset GeneratorDataset(std::function<std::function<std::optional<Row>()>()> make_generator,
                         std::vector<std::string> column_names, const GeneratorOptions& opts) {
  SPORE_CHECK(bool(make_generator), "[GeneratorDataset] make_generator is empty");
  check_names(column_names, "GeneratorDataset");
  SPORE_CHECK(!opts.sampler && !opts.shuffle && opts.num_shards == 1,
              "[GeneratorDataset] samplers, shuffle and shards need a random-access source "
              "(fn(i) with a size, or an object with size() and operator[]); an iterable source "
              "is read in order (add .shuffle(buffer_size) to the pipeline instead)");
  SPORE_CHECK(opts.num_samples >= -1,
              "[GeneratorDataset] num_samples must be >= 0 (or -1 for all), got ",
              opts.num_samples);
  return Dataset(std::make_shared<IterableNode>(std::move(make_generator), std::move(column_names),
                                                opts.num_samples));
}

}  // namespace spore::data
