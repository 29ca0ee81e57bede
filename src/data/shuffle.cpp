// Shuffle: MindSpore's buffered shuffle. A buffer of buffer_size rows is filled from the child;
// each output is a uniformly chosen buffer slot, refilled with the child's next row. A buffer at
// least as large as the dataset gives a uniform permutation. Pass k of the node draws from
// epoch_seed(salt, k), so every epoch is reshuffled, and reruns with the same seed repeat.
#include <atomic>

#include "core/random.h"
#include "data/node.h"

namespace spore::data {
namespace {

class ShuffleNode : public UnaryNode {
 public:
  ShuffleNode(std::shared_ptr<DatasetNode> child, int64_t buffer_size)
      : UnaryNode(std::move(child)), buffer_size_(buffer_size) {}
  std::string name() const override { return "Shuffle"; }

  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      RowIteratorPtr src;
      std::vector<std::pair<Row, SampleId>> buf;
      size_t cap = 0;
      uint64_t seed = 0, counter = 0;
      bool filled = false;
      std::optional<Row> next() override {
        if (!filled) {
          filled = true;
          while (buf.size() < cap) {
            auto row = src->next();
            if (!row) break;
            buf.emplace_back(std::move(*row), src->id);
          }
        }
        if (buf.empty()) return std::nullopt;
        const size_t j = size_t(random::bits(seed, counter++) % buf.size());
        Row out = std::move(buf[j].first);
        id = buf[j].second;
        if (auto row = src->next()) {
          buf[j] = {std::move(*row), src->id};
        } else {
          if (j + 1 != buf.size()) buf[j] = std::move(buf.back());
          buf.pop_back();
        }
        return out;
      }
    };
    auto it = std::make_unique<It>();
    it->src = child_->make_iterator();
    // Cap the reservation: a buffer far larger than the dataset needs no more slots than rows.
    it->cap = size_t(std::min(buffer_size_, std::max<int64_t>(child_->size(), 1)));
    it->buf.reserve(it->cap);
    it->seed = epoch_seed(0x73687566666c65ull, epoch_++);  // "shuffle"
    return it;
  }

 private:
  int64_t buffer_size_;
  std::atomic<int64_t> epoch_{0};
};

}  // namespace

std::shared_ptr<DatasetNode> make_shuffle_node(std::shared_ptr<DatasetNode> child,
                                               int64_t buffer_size) {
  return std::make_shared<ShuffleNode>(std::move(child), buffer_size);
}

}  // namespace spore::data
