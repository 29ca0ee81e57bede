// Map: runs a list of Operations on some columns of every row. The first operation gets the
// input columns (in the order given), each next one the previous one's outputs; the last one's
// outputs become the output columns, placed where the first input column was (the other input
// columns are dropped). Rows are transformed on an OrderedPool of workers (see executor.h), so
// order is kept and at most prefetch-size rows are in flight. Before a row's operations run,
// this thread's sample_rng() is seeded from (global seed, stage depth, epoch, row number), so
// random transforms give the same output whatever the number of workers.
#include <atomic>

#include "data/executor.h"
#include "spore/context.h"
#include "spore/data/sample_rng.h"

namespace spore::data {
namespace {

class MapNode : public UnaryNode {
 public:
  MapNode(std::shared_ptr<DatasetNode> child, std::vector<Operation> ops,
          std::vector<size_t> in_cols, std::vector<std::string> out_names, int workers)
      : UnaryNode(std::move(child)),
        ops_(std::move(ops)),
        in_cols_(std::move(in_cols)),
        out_names_(std::move(out_names)),
        workers_(workers) {
    const auto names = child_->column_names();
    std::vector<std::string> in_names;
    for (size_t c : in_cols_) in_names.push_back(names[c]);
    label_ =
        in_names.size() == 1 ? "column \"" + in_names[0] + "\"" : "columns " + join_names(in_names);
    for (size_t c = 0; c < names.size(); ++c) {
      if (c == in_cols_[0]) {
        for (size_t k = 0; k < out_names_.size(); ++k) layout_.push_back(-1 - int64_t(k));
        continue;
      }
      bool is_input = false;
      for (size_t i : in_cols_) is_input |= i == c;
      if (!is_input) layout_.push_back(int64_t(c));
    }
    for (int64_t l : layout_)
      names_.push_back(l >= 0 ? names[size_t(l)] : out_names_[size_t(-1 - l)]);
  }
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "Map"; }
  RowIteratorPtr make_iterator() override;

  // Transforms `row` in place (an op's error is rethrown with the columns and op index).
  void apply(Row& row) const {
    Row cur;
    cur.reserve(in_cols_.size());
    for (size_t c : in_cols_) cur.push_back(row[c]);
    for (size_t i = 0; i < ops_.size(); ++i) {
      try {
        const Operation& op = ops_[i];
        if (op.is_tensor_op()) {
          SPORE_CHECK(cur.size() == 1, "gets ", cur.size(),
                      " columns but is a one-column TensorOp (use a RowOp for several)");
          Tensor y = op.tensor_op()(cur[0]);
          SPORE_CHECK(y.defined(), "returned an undefined tensor");
          cur.assign(1, std::move(y));
        } else {
          Row y = op.row_op()(cur);
          for (size_t k = 0; k < y.size(); ++k)
            SPORE_CHECK(y[k].defined(), "returned an undefined tensor as output ", k);
          cur = std::move(y);
        }
      } catch (const Error& e) {
        SPORE_THROW(e.kind(), "[Dataset.map] ", label_, ", operation ", i, ": ", e.what());
      } catch (const std::exception& e) {
        SPORE_THROW(ErrorKind::RuntimeError, "[Dataset.map] ", label_, ", operation ", i, ": ",
                    e.what());
      }
    }
    SPORE_CHECK(cur.size() == out_names_.size(), "[Dataset.map] ", label_,
                ": the operations return ", cur.size(), " columns but output_columns names ",
                out_names_.size(), " (", join_names(out_names_), ")");
    Row out;
    out.reserve(layout_.size());
    for (int64_t l : layout_)
      out.push_back(l >= 0 ? std::move(row[size_t(l)]) : std::move(cur[size_t(-1 - l)]));
    row = std::move(out);
  }

  std::vector<Operation> ops_;
  std::vector<size_t> in_cols_;
  std::vector<std::string> out_names_, names_;
  std::vector<int64_t> layout_;  // output column k: child column layout_[k], or op output -1 - l
  std::string label_;
  int workers_;
  std::atomic<int64_t> epoch_{0};
};

struct MapIt : RowIterator {
  std::shared_ptr<const MapNode> node;
  RowIteratorPtr src;  // pulled only by the pool's puller
  uint64_t seed = 0;
  int64_t epoch = 0;
  std::unique_ptr<detail::OrderedPool> pool;  // last: destroyed (joined) first
  std::optional<Row> next() override {
    auto t = pool->next();
    if (!t) return std::nullopt;
    id = t->id;
    return std::move(t->row);
  }
};

RowIteratorPtr MapNode::make_iterator() {
  auto it = std::make_unique<MapIt>();
  it->node = std::static_pointer_cast<const MapNode>(shared_from_this());
  it->src = child_->make_iterator();
  it->seed = get_seed();
  it->epoch = epoch_++;
  MapIt* self = it.get();
  const uint64_t stage = uint64_t(depth());
  it->pool = std::make_unique<detail::OrderedPool>(
      workers_ <= 1 ? 0 : workers_, get_prefetch_size(),
      [self](int64_t, detail::Task& t) {
        t.row = self->src->next();
        t.id = self->src->id;
        return t.row.has_value();
      },
      [self, stage](int64_t seq, detail::Task& t) {
        sample_rng().seed(sample_seed(self->seed, stage, uint64_t(self->epoch), uint64_t(seq)));
        try {
          self->node->apply(*t.row);
        } catch (...) {
          handle_sample_error(t.id, std::current_exception());
          t.skipped = true;
        }
      },
      "map");
  return it;
}

}  // namespace

std::shared_ptr<DatasetNode> make_map_node(std::shared_ptr<DatasetNode> child,
                                           std::vector<Operation> ops, std::vector<size_t> in_cols,
                                           std::vector<std::string> out_names, int workers) {
  return std::make_shared<MapNode>(std::move(child), std::move(ops), std::move(in_cols),
                                   std::move(out_names), workers);
}

}  // namespace spore::data
