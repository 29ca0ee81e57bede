// Batch: stacks batch_size consecutive rows into one row of (B, ...) tensors, column by column
// (plain memcpy of each row's bytes; rows of a column must agree in shape and dtype unless the
// column is padded). A short last batch is kept unless drop_remainder. Before stacking, an
// optional per_batch_map transforms the batch's samples (sample_rng() seeded per batch), and
// pad_info pads variable shapes to a common one. When get_prefetch_size() > 0 one producer
// thread builds batches ahead into a bounded queue; destroying the iterator stops and joins it.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "core/tensor_util.h"
#include "data/node.h"
#include "spore/context.h"
#include "spore/data/sample_rng.h"
#include "spore/profiler.h"

namespace spore::data {
namespace {

// t copied into the corner of a new tensor of `shape` (same rank, each dim >= t's), the rest
// filled with `value`.
Tensor pad_to(const Tensor& t, const Shape& shape, double value) {
  Tensor dst = Tensor::empty(shape, t.dtype());
  const size_t is = itemsize(t.dtype());
  std::vector<char> one(is);
  spore::detail::convert_elements(&value, kFloat64, one.data(), t.dtype(), 1);
  char* p = static_cast<char*>(dst.data_ptr());
  for (int64_t i = 0, n = dst.numel(); i < n; ++i) std::memcpy(p + size_t(i) * is, one.data(), is);
  if (t.numel() == 0) return dst;
  spore::detail::copy_from_buffer(spore::detail::make_view(dst, t.shape(), dst.strides(), 0),
                                  spore::detail::contiguous_copy(t).data_ptr());
  return dst;
}

class BatchNode : public UnaryNode {
 public:
  BatchNode(std::shared_ptr<DatasetNode> child, int64_t batch_size, BatchOptions opts)
      : UnaryNode(std::move(child)), batch_(batch_size), opts_(std::move(opts)) {
    names_ = child_->column_names();
    pads_.resize(names_.size());
    for (size_t c = 0; c < names_.size(); ++c) {
      auto it = opts_.pad_info.find(names_[c]);
      if (it != opts_.pad_info.end())
        pads_[c] = it->second;
      else if (opts_.pad_all)
        pads_[c] = PadInfo{};
    }
    for (const std::string& n : opts_.input_columns)
      for (size_t c = 0; c < names_.size(); ++c)
        if (names_[c] == n) map_cols_.push_back(c);
    if (opts_.per_batch_map && opts_.input_columns.empty())
      for (size_t c = 0; c < names_.size(); ++c) map_cols_.push_back(c);
  }
  int64_t size() const override {
    const int64_t n = child_->size();
    return opts_.drop_remainder ? n / batch_ : (n + batch_ - 1) / batch_;
  }
  int64_t batch_size() const override { return batch_; }
  std::string name() const override { return "Batch"; }
  RowIteratorPtr make_iterator() override;

  // per_batch_map on the selected columns of rows (in place).
  void run_batch_map(std::vector<Row>& rows, int64_t batch_num, int64_t epoch,
                     uint64_t seed) const {
    std::vector<std::vector<Tensor>> cols(map_cols_.size());
    for (size_t k = 0; k < map_cols_.size(); ++k)
      for (auto& r : rows) cols[k].push_back(std::move(r[map_cols_[k]]));
    sample_rng().seed(sample_seed(seed, uint64_t(depth()), uint64_t(epoch), uint64_t(batch_num)));
    std::vector<std::vector<Tensor>> out;
    try {
      out = opts_.per_batch_map(std::move(cols), BatchInfo{batch_num, epoch});
    } catch (const Error& e) {
      SPORE_THROW(e.kind(), "[Dataset.batch] per_batch_map, batch ", batch_num, ": ", e.what());
    }
    SPORE_CHECK(out.size() == map_cols_.size(), "[Dataset.batch] per_batch_map returned ",
                out.size(), " columns, expected ", map_cols_.size());
    const size_t n = out.empty() ? rows.size() : out[0].size();
    for (size_t k = 0; k < out.size(); ++k)
      SPORE_CHECK(out[k].size() == n, "[Dataset.batch] per_batch_map returned ", out[k].size(),
                  " samples in column ", k, " but ", n, " in column 0");
    SPORE_CHECK(n == rows.size() || map_cols_.size() == names_.size(),
                "[Dataset.batch] per_batch_map changed the number of samples (", rows.size(),
                " -> ", n, ") but maps only some columns; map every column to change it");
    rows.resize(n, Row(names_.size()));
    for (size_t k = 0; k < out.size(); ++k)
      for (size_t i = 0; i < n; ++i) rows[i][map_cols_[k]] = std::move(out[k][i]);
  }

  // (B, ...) stacks of rows[i][c] for every column c (padded where asked).
  Row stack(std::vector<Row>& rows, const std::vector<SampleId>& ids) const {
    const profiling::Span span("data", "batch");
    const size_t ncols = rows[0].size();
    auto which = [&](size_t i) {
      const std::string d = i < ids.size() ? describe(ids[i]) : "";
      return d.empty() ? std::string() : " (" + d + ")";
    };
    Row out;
    out.reserve(ncols);
    for (size_t c = 0; c < ncols; ++c) {
      const std::string& cname = c < names_.size() ? names_[c] : std::to_string(c);
      for (size_t i = 1; i < rows.size(); ++i)
        SPORE_CHECK(rows[i].size() == ncols, "[Dataset.batch] row ", i, " of a batch has ",
                    rows[i].size(), " columns but row 0 has ", ncols);
      if (c < pads_.size() && pads_[c]) {
        const PadInfo& pad = *pads_[c];
        Shape target = rows[0][c].shape();
        for (size_t i = 0; i < rows.size(); ++i) {
          const Tensor& t = rows[i][c];
          SPORE_CHECK(t.dim() == int64_t(target.size()) && t.dtype() == rows[0][c].dtype(),
                      "[Dataset.batch] column \"", cname, "\": row ", i, which(i), " is ",
                      dtype_name(t.dtype()), " ", shape_str(t.shape()), " but row 0 is ",
                      dtype_name(rows[0][c].dtype()), " ", shape_str(rows[0][c].shape()),
                      "; padding needs the same rank and dtype");
          for (size_t d = 0; d < target.size(); ++d) target[d] = std::max(target[d], t.shape()[d]);
        }
        if (!pad.shape.empty()) {
          SPORE_CHECK(pad.shape.size() == target.size(), "[Dataset.batch] pad_info of column \"",
                      cname, "\" has rank ", pad.shape.size(), " but the rows have rank ",
                      target.size());
          for (size_t d = 0; d < target.size(); ++d)
            if (pad.shape[d] >= 0) {
              SPORE_CHECK(pad.shape[d] >= target[d], "[Dataset.batch] column \"", cname,
                          "\": pad_info shape ", shape_str(pad.shape), " is smaller than a row (",
                          shape_str(target), " needed)");
              target[d] = pad.shape[d];
            }
        }
        for (auto& r : rows)
          if (r[c].shape() != target) r[c] = pad_to(r[c], target, pad.value);
      }
      const Tensor& first = rows[0][c];
      for (size_t i = 1; i < rows.size(); ++i) {
        const Tensor& t = rows[i][c];
        SPORE_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(),
                    "[Dataset.batch] column \"", cname, "\": row ", i, " of the batch", which(i),
                    " is ", dtype_name(t.dtype()), " ", shape_str(t.shape()), " but row 0 is ",
                    dtype_name(first.dtype()), " ", shape_str(first.shape()),
                    "; rows must match to be stacked (resize them in a map first, or pad them "
                    "with BatchOptions::pad_info)");
      }
      Shape shape{int64_t(rows.size())};
      shape.insert(shape.end(), first.shape().begin(), first.shape().end());
      Tensor dst = Tensor::empty(shape, first.dtype());
      char* p = static_cast<char*>(dst.data_ptr());
      const size_t row_bytes = first.nbytes();
      for (size_t i = 0; i < rows.size(); ++i)
        spore::detail::copy_to_buffer(rows[i][c], p + i * row_bytes);
      out.push_back(std::move(dst));
    }
    return out;
  }

  int64_t batch_;
  BatchOptions opts_;
  std::vector<std::string> names_;
  std::vector<std::optional<PadInfo>> pads_;
  std::vector<size_t> map_cols_;
  std::atomic<int64_t> epoch_{0};
};

struct SerialBatchIt : RowIterator {
  std::shared_ptr<const BatchNode> node;
  RowIteratorPtr src;
  bool ended = false;
  int64_t batch_num = 0, epoch = 0;
  uint64_t seed = 0;
  std::optional<Row> next() override {
    if (ended) return std::nullopt;
    std::vector<Row> rows;
    std::vector<SampleId> ids;
    rows.reserve(size_t(node->batch_));
    while (int64_t(rows.size()) < node->batch_) {
      auto row = src->next();
      if (!row) {
        ended = true;
        break;
      }
      rows.push_back(std::move(*row));
      ids.push_back(src->id);
    }
    if (rows.empty() || (node->opts_.drop_remainder && int64_t(rows.size()) < node->batch_))
      return std::nullopt;
    id = ids[0];
    if (node->opts_.per_batch_map) {
      node->run_batch_map(rows, batch_num, epoch, seed);
      ids.clear();
      if (rows.empty())
        SPORE_THROW(ErrorKind::ValueError, "[Dataset.batch] per_batch_map returned an empty batch");
    }
    ++batch_num;
    return node->stack(rows, ids);
  }
};

// Runs `inner` on a producer thread, keeping up to `depth` finished rows queued.
struct PrefetchIt : RowIterator {
  struct Item {
    std::optional<Row> row;
    SampleId id;
    std::exception_ptr err;
  };
  RowIteratorPtr inner;
  size_t depth = 2;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;
  bool done = false, stop = false;
  std::thread thread;

  void start() {
    thread = std::thread([this] { produce(); });
  }

  void produce() {
    while (true) {
      Item item;
      try {
        item.row = inner->next();
        item.id = inner->id;
      } catch (...) {
        item.err = std::current_exception();
      }
      const bool last = !item.row;  // the end, or an error (which ends the pass)
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return stop || queue.size() < depth; });
      if (stop) return;
      if (item.row || item.err) queue.push_back(std::move(item));
      if (last) done = true;
      lk.unlock();
      cv.notify_all();
      if (last) return;
    }
  }

  std::optional<Row> next() override {
    Item item;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return !queue.empty() || done; });
      if (queue.empty()) return std::nullopt;
      item = std::move(queue.front());
      queue.pop_front();
    }
    cv.notify_all();
    if (item.err) std::rethrow_exception(item.err);
    id = item.id;
    return std::move(item.row);
  }

  ~PrefetchIt() override {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();  // the producer finishes at most the batch it is building
  }
};

RowIteratorPtr BatchNode::make_iterator() {
  auto serial = std::make_unique<SerialBatchIt>();
  serial->node = std::static_pointer_cast<const BatchNode>(shared_from_this());
  serial->src = child_->make_iterator();
  serial->epoch = epoch_++;
  serial->seed = get_seed();
  const int64_t prefetch = get_prefetch_size();
  if (prefetch <= 0) return serial;
  auto it = std::make_unique<PrefetchIt>();
  it->inner = std::move(serial);
  it->depth = size_t(std::max<int64_t>(2, (prefetch + batch_ - 1) / batch_));
  it->start();
  return it;
}

}  // namespace

std::shared_ptr<DatasetNode> make_batch_node(std::shared_ptr<DatasetNode> child, int64_t batch_size,
                                             BatchOptions opts) {
  return std::make_shared<BatchNode>(std::move(child), batch_size, std::move(opts));
}

}  // namespace spore::data
