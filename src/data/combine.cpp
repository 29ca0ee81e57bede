// Nodes that reshape the column set or combine datasets: Project (select / reorder columns),
// Rename, Zip (columns side by side), Concat (rows one after another) and Subset (the rows at
// chosen positions, for split()). Each is a thin RowIterator over its children's iterators.
#include <algorithm>

#include "data/node.h"

namespace spore::data {
namespace {

// -- Project / Rename -----------------------------------------------------------------------------
class ProjectNode : public UnaryNode {
 public:
  ProjectNode(std::shared_ptr<DatasetNode> child, std::vector<size_t> cols,
              std::vector<std::string> names)
      : UnaryNode(std::move(child)), cols_(std::move(cols)), names_(std::move(names)) {}
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "Project"; }
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      RowIteratorPtr src;
      std::vector<size_t> cols;
      std::optional<Row> next() override {
        auto row = src->next();
        if (!row) return std::nullopt;
        id = src->id;
        Row out;
        out.reserve(cols.size());
        for (size_t c : cols) out.push_back((*row)[c]);
        return out;
      }
    };
    auto it = std::make_unique<It>();
    it->src = child_->make_iterator();
    it->cols = cols_;
    return it;
  }

 private:
  std::vector<size_t> cols_;
  std::vector<std::string> names_;
};

// -- Zip ------------------------------------------------------------------------------------------
class ZipNode : public DatasetNode {
 public:
  explicit ZipNode(std::vector<std::shared_ptr<DatasetNode>> children)
      : children_(std::move(children)) {}
  int64_t size() const override {
    int64_t n = children_[0]->size();
    for (auto& c : children_) n = std::min(n, c->size());
    return n;
  }
  std::vector<std::string> column_names() const override {
    std::vector<std::string> names;
    for (auto& c : children_)
      for (auto& n : c->column_names()) names.push_back(n);
    return names;
  }
  int64_t batch_size() const override { return children_[0]->batch_size(); }
  int depth() const override {
    int d = 0;
    for (auto& c : children_) d = std::max(d, c->depth());
    return d + 1;
  }
  std::string name() const override { return "Zip"; }
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      std::vector<RowIteratorPtr> srcs;
      std::optional<Row> next() override {
        Row out;
        for (size_t k = 0; k < srcs.size(); ++k) {
          auto row = srcs[k]->next();
          if (!row) return std::nullopt;  // the shortest child ends the zip
          if (k == 0) id = srcs[0]->id;
          for (auto& t : *row) out.push_back(std::move(t));
        }
        return out;
      }
    };
    auto it = std::make_unique<It>();
    for (auto& c : children_) it->srcs.push_back(c->make_iterator());
    return it;
  }

 private:
  std::vector<std::shared_ptr<DatasetNode>> children_;
};

// -- Concat ---------------------------------------------------------------------------------------
class ConcatNode : public DatasetNode {
 public:
  explicit ConcatNode(std::vector<std::shared_ptr<DatasetNode>> children)
      : children_(std::move(children)) {}
  int64_t size() const override {
    int64_t n = 0;
    for (auto& c : children_) n += c->size();
    return n;
  }
  std::vector<std::string> column_names() const override { return children_[0]->column_names(); }
  int64_t batch_size() const override { return children_[0]->batch_size(); }
  int depth() const override {
    int d = 0;
    for (auto& c : children_) d = std::max(d, c->depth());
    return d + 1;
  }
  std::string name() const override { return "Concat"; }
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      std::vector<std::shared_ptr<DatasetNode>> children;
      size_t k = 0;
      RowIteratorPtr src;
      std::optional<Row> next() override {
        while (k < children.size()) {
          if (!src) src = children[k]->make_iterator();  // one child's workers at a time
          if (auto row = src->next()) {
            id = src->id;
            return row;
          }
          src.reset();
          ++k;
        }
        return std::nullopt;
      }
    };
    auto it = std::make_unique<It>();
    it->children = children_;
    return it;
  }

 private:
  std::vector<std::shared_ptr<DatasetNode>> children_;
};

// -- Subset: the child's rows at sorted positions -------------------------------------------------
class SubsetNode : public UnaryNode {
 public:
  SubsetNode(std::shared_ptr<DatasetNode> child, std::vector<int64_t> positions)
      : UnaryNode(std::move(child)), pos_(std::move(positions)) {}
  int64_t size() const override { return int64_t(pos_.size()); }
  std::string name() const override { return "Split"; }
  RowIteratorPtr make_iterator() override {
    struct It : RowIterator {
      RowIteratorPtr src;
      std::shared_ptr<const SubsetNode> node;
      size_t k = 0;
      int64_t at = 0;  // position of the child's next row
      std::optional<Row> next() override {
        const auto& pos = node->pos_;
        if (k >= pos.size()) return std::nullopt;
        while (true) {
          auto row = src->next();
          if (!row) return std::nullopt;
          if (at++ == pos[k]) {
            ++k;
            id = src->id;
            return row;
          }
        }
      }
    };
    auto it = std::make_unique<It>();
    it->src = child_->make_iterator();
    it->node = std::static_pointer_cast<const SubsetNode>(shared_from_this());
    return it;
  }

 private:
  std::vector<int64_t> pos_;
};

}  // namespace

std::shared_ptr<DatasetNode> make_project_node(std::shared_ptr<DatasetNode> child,
                                               std::vector<size_t> cols,
                                               std::vector<std::string> names) {
  return std::make_shared<ProjectNode>(std::move(child), std::move(cols), std::move(names));
}
std::shared_ptr<DatasetNode> make_zip_node(std::vector<std::shared_ptr<DatasetNode>> children) {
  return std::make_shared<ZipNode>(std::move(children));
}
std::shared_ptr<DatasetNode> make_concat_node(std::vector<std::shared_ptr<DatasetNode>> children) {
  return std::make_shared<ConcatNode>(std::move(children));
}
std::shared_ptr<DatasetNode> make_subset_node(std::shared_ptr<DatasetNode> child,
                                              std::vector<int64_t> positions) {
  return std::make_shared<SubsetNode>(std::move(child), std::move(positions));
}

}  // namespace spore::data
