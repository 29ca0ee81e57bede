// Containers, MindSpore's SequentialCell (runs its cells in order) and CellList (holds cells for a
// parent's construct to index). Cells are owned shared_ptrs named "0", "1", ... (or given names).
#pragma once
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "spore/nn/cell.h"

namespace spore::nn {

class SequentialCell : public Cell {
 public:
  SequentialCell();
  SequentialCell(std::vector<CellPtr> cells);                                // NOLINT
  SequentialCell(std::initializer_list<CellPtr> cells);                      // NOLINT
  SequentialCell(std::vector<std::pair<std::string, CellPtr>> named_cells);  // NOLINT: OrderedDict
  void append(CellPtr cell);
  Cell& operator[](size_t i) const;
  size_t size() const { return list_.size(); }
  const std::vector<CellPtr>& cells() const { return list_; }
  Tensor construct(const Tensor& x) override;  // x -> cell0 -> cell1 -> ...

 private:
  std::vector<CellPtr> list_;
};

class CellList : public Cell {
 public:
  CellList();
  CellList(std::vector<CellPtr> cells);            // NOLINT
  CellList(std::initializer_list<CellPtr> cells);  // NOLINT
  void append(CellPtr cell);
  Cell& operator[](size_t i) const;
  size_t size() const { return list_.size(); }
  auto begin() const { return list_.begin(); }
  auto end() const { return list_.end(); }

 private:
  std::vector<CellPtr> list_;
};

}  // namespace spore::nn
