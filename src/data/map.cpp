// Map: applies a list of TensorOps to one column of every row. With num_parallel_workers > 1,
// worker threads pull rows from the child one at a time (numbered in pull order), transform them
// concurrently and park the results; next() hands them out strictly in pull order, so the output
// order never depends on thread timing. At most `capacity` rows are in flight (backpressure).
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "data/node.h"

namespace spore::data {
namespace {

// Applies ops to row[col]; an op's spore::Error is rethrown with the column and op index added.
void apply_ops(Row& row, const std::vector<TensorOp>& ops, size_t col, const std::string& colname) {
  Tensor x = row[col];
  for (size_t i = 0; i < ops.size(); ++i) {
    try {
      x = ops[i](x);
    } catch (const Error& e) {
      SPORE_THROW(e.kind(), "[Dataset.map] column \"", colname, "\", operation ", i, ": ",
                  e.what());
    }
    SPORE_CHECK(x.defined(), "[Dataset.map] column \"", colname, "\", operation ", i,
                " returned an undefined tensor");
  }
  row[col] = std::move(x);
}

class MapNode : public UnaryNode {
 public:
  MapNode(std::shared_ptr<DatasetNode> child, std::vector<TensorOp> ops, size_t col, int workers)
      : UnaryNode(std::move(child)), ops_(std::move(ops)), col_(col), workers_(workers) {
    colname_ = child_->column_names()[col_];
  }
  std::string name() const override { return "Map"; }
  std::unique_ptr<Iterator> make_iterator() override;

  std::vector<TensorOp> ops_;
  size_t col_;
  int workers_;
  std::string colname_;
};

struct SerialMapIt : Iterator {
  std::shared_ptr<const MapNode> node;
  std::unique_ptr<Iterator> src;
  std::optional<Row> next() override {
    auto row = src->next();
    if (row) apply_ops(*row, node->ops_, node->col_, node->colname_);
    return row;
  }
};

struct ParallelMapIt : Iterator {
  struct Result {
    std::optional<Row> row;
    std::exception_ptr err;
  };
  std::shared_ptr<const MapNode> node;
  std::unique_ptr<Iterator> src;  // pulled only under pull_mu
  std::mutex pull_mu;             // one puller at a time; taken before mu, never after
  std::mutex mu;                  // guards everything below
  std::condition_variable cv_work, cv_out;
  std::map<int64_t, Result> done;  // finished rows by sequence number
  int64_t next_seq = 0, out_seq = 0, end_seq = -1;
  bool src_done = false, stop = false;
  int64_t capacity = 0;
  std::vector<std::thread> threads;

  void start(int workers) {
    capacity = 2 * int64_t(workers) + 2;
    for (int i = 0; i < workers; ++i) threads.emplace_back([this] { work(); });
  }

  void work() {
    while (true) {
      int64_t seq;
      std::optional<Row> row;
      {
        std::lock_guard<std::mutex> pull(pull_mu);
        {
          std::unique_lock<std::mutex> lk(mu);
          cv_work.wait(lk, [&] { return stop || src_done || next_seq - out_seq < capacity; });
          if (stop || src_done) return;
          seq = next_seq++;
        }
        std::exception_ptr err;
        try {
          row = src->next();
        } catch (...) {
          err = std::current_exception();
        }
        if (!row) {  // the end of the child (or its error, handed out in order, then the end)
          {
            std::lock_guard<std::mutex> lk(mu);
            src_done = true;
            end_seq = seq + (err ? 1 : 0);
            if (err) done[seq] = Result{std::nullopt, err};
          }
          cv_out.notify_all();
          cv_work.notify_all();
          return;
        }
      }
      Result res;
      try {
        apply_ops(*row, node->ops_, node->col_, node->colname_);
        res.row = std::move(row);
      } catch (...) {
        res.err = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        done[seq] = std::move(res);
      }
      cv_out.notify_all();
    }
  }

  std::optional<Row> next() override {
    Result res;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv_out.wait(lk, [&] { return done.count(out_seq) || (src_done && out_seq >= end_seq); });
      auto it = done.find(out_seq);
      if (it == done.end()) return std::nullopt;
      res = std::move(it->second);
      done.erase(it);
      ++out_seq;
    }
    cv_work.notify_all();
    if (res.err) std::rethrow_exception(res.err);
    return std::move(res.row);
  }

  ~ParallelMapIt() override {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv_work.notify_all();
    for (auto& t : threads) t.join();
  }
};

std::unique_ptr<Iterator> MapNode::make_iterator() {
  auto self = std::static_pointer_cast<const MapNode>(shared_from_this());
  if (workers_ <= 1) {
    auto it = std::make_unique<SerialMapIt>();
    it->node = std::move(self);
    it->src = child_->make_iterator();
    return it;
  }
  auto it = std::make_unique<ParallelMapIt>();
  it->node = std::move(self);
  it->src = child_->make_iterator();
  it->start(workers_);
  return it;
}

}  // namespace

std::shared_ptr<DatasetNode> make_map_node(std::shared_ptr<DatasetNode> child,
                                           std::vector<TensorOp> ops, size_t column, int workers) {
  return std::make_shared<MapNode>(std::move(child), std::move(ops), column, workers);
}

}  // namespace spore::data
