// Batch: stacks batch_size consecutive rows into one row of (B, ...) tensors, column by column
// (plain memcpy of each row's bytes; rows of a column must agree in shape and dtype). A short
// last batch is kept unless drop_remainder. When get_prefetch_size() > 0 one producer thread
// builds batches ahead into a bounded queue; destroying the iterator stops and joins it.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "data/node.h"
#include "data/tensor_util.h"

namespace spore::data {
namespace {

class BatchNode : public UnaryNode {
 public:
  BatchNode(std::shared_ptr<DatasetNode> child, int64_t batch_size, bool drop_remainder)
      : UnaryNode(std::move(child)), batch_(batch_size), drop_(drop_remainder) {
    names_ = child_->column_names();
  }
  int64_t size() const override {
    const int64_t n = child_->size();
    return drop_ ? n / batch_ : (n + batch_ - 1) / batch_;
  }
  int64_t batch_size() const override { return batch_; }
  std::string name() const override { return "Batch"; }
  std::unique_ptr<Iterator> make_iterator() override;

  // (B, ...) stacks of rows[i][c] for every column c.
  Row stack(const std::vector<Row>& rows) const {
    const size_t ncols = rows[0].size();
    Row out;
    out.reserve(ncols);
    for (size_t c = 0; c < ncols; ++c) {
      const std::string& cname = c < names_.size() ? names_[c] : std::to_string(c);
      const Tensor& first = rows[0][c];
      for (size_t i = 1; i < rows.size(); ++i) {
        SPORE_CHECK(rows[i].size() == ncols, "[Dataset.batch] row ", i, " of a batch has ",
                    rows[i].size(), " columns but row 0 has ", ncols);
        const Tensor& t = rows[i][c];
        SPORE_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(),
                    "[Dataset.batch] column \"", cname, "\": row ", i, " of the batch is ",
                    dtype_name(t.dtype()), " ", shape_str(t.shape()), " but row 0 is ",
                    dtype_name(first.dtype()), " ", shape_str(first.shape()),
                    "; rows must match to be stacked (resize them in a map first)");
      }
      Shape shape{int64_t(rows.size())};
      shape.insert(shape.end(), first.shape().begin(), first.shape().end());
      Tensor dst = Tensor::empty(shape, first.dtype());
      char* p = static_cast<char*>(dst.data_ptr());
      const size_t row_bytes = first.nbytes();
      for (size_t i = 0; i < rows.size(); ++i)
        detail::copy_to_buffer(rows[i][c], p + i * row_bytes);
      out.push_back(std::move(dst));
    }
    return out;
  }

  int64_t batch_;
  bool drop_;
  std::vector<std::string> names_;
};

struct SerialBatchIt : Iterator {
  std::shared_ptr<const BatchNode> node;
  std::unique_ptr<Iterator> src;
  bool ended = false;
  std::optional<Row> next() override {
    if (ended) return std::nullopt;
    std::vector<Row> rows;
    rows.reserve(size_t(node->batch_));
    while (int64_t(rows.size()) < node->batch_) {
      auto row = src->next();
      if (!row) {
        ended = true;
        break;
      }
      rows.push_back(std::move(*row));
    }
    if (rows.empty() || (node->drop_ && int64_t(rows.size()) < node->batch_)) return std::nullopt;
    return node->stack(rows);
  }
};

// Runs `inner` on a producer thread, keeping up to `depth` finished rows queued.
struct PrefetchIt : Iterator {
  struct Item {
    std::optional<Row> row;
    std::exception_ptr err;
  };
  std::unique_ptr<Iterator> inner;
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

std::unique_ptr<Iterator> BatchNode::make_iterator() {
  auto serial = std::make_unique<SerialBatchIt>();
  serial->node = std::static_pointer_cast<const BatchNode>(shared_from_this());
  serial->src = child_->make_iterator();
  const int64_t depth = get_prefetch_size();
  if (depth <= 0) return serial;
  auto it = std::make_unique<PrefetchIt>();
  it->inner = std::move(serial);
  it->depth = size_t(depth);
  it->start();
  return it;
}

}  // namespace

std::shared_ptr<DatasetNode> make_batch_node(std::shared_ptr<DatasetNode> child, int64_t batch_size,
                                             bool drop_remainder) {
  return std::make_shared<BatchNode>(std::move(child), batch_size, drop_remainder);
}

}  // namespace spore::data
