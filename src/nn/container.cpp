// SequentialCell and CellList (spore/nn/container.h).
#include "spore/nn/container.h"

namespace spore::nn {

SequentialCell::SequentialCell() { set_cls_name("SequentialCell"); }
SequentialCell::SequentialCell(std::vector<CellPtr> cells) : SequentialCell() {
  for (auto& c : cells) append(std::move(c));
}
SequentialCell::SequentialCell(std::initializer_list<CellPtr> cells)
    : SequentialCell(std::vector<CellPtr>(cells)) {}
SequentialCell::SequentialCell(std::vector<std::pair<std::string, CellPtr>> named_cells)
    : SequentialCell() {
  for (auto& [name, c] : named_cells) {
    register_cell(name, c);
    list_.push_back(std::move(c));
  }
}
void SequentialCell::append(CellPtr cell) {
  SPORE_CHECK(cell != nullptr, "[SequentialCell] cannot append a null cell");
  register_cell(std::to_string(list_.size()), cell);
  list_.push_back(std::move(cell));
}
Cell& SequentialCell::operator[](size_t i) const {
  SPORE_CHECK_INDEX(i < list_.size(), "[SequentialCell] index ", i, " out of range for ",
                    list_.size(), " cells");
  return *list_[i];
}
Tensor SequentialCell::construct(const Tensor& x) {
  Tensor y = x;
  for (auto& c : list_) y = (*c)(y);
  return y;
}

CellList::CellList() { set_cls_name("CellList"); }
CellList::CellList(std::vector<CellPtr> cells) : CellList() {
  for (auto& c : cells) append(std::move(c));
}
CellList::CellList(std::initializer_list<CellPtr> cells) : CellList(std::vector<CellPtr>(cells)) {}
void CellList::append(CellPtr cell) {
  SPORE_CHECK(cell != nullptr, "[CellList] cannot append a null cell");
  register_cell(std::to_string(list_.size()), cell);
  list_.push_back(std::move(cell));
}
Cell& CellList::operator[](size_t i) const {
  SPORE_CHECK_INDEX(i < list_.size(), "[CellList] index ", i, " out of range for ", list_.size(),
                    " cells");
  return *list_[i];
}

}  // namespace spore::nn
