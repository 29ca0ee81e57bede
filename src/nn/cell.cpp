// nn::Cell (spore/nn/cell.h): registration, tree walks with dotted names, set_train, to(dtype) and
// the MindSpore-style repr. Walks are pre-order (a cell's own parameters, then each sub-cell's in
// registration order) and skip tensors or cells reached twice (shared weights, shared sub-cells).
#include "spore/nn/cell.h"

#include <cxxabi.h>

#include <cstdlib>
#include <set>
#include <typeinfo>

#include "spore/autograd.h"
#include "spore/ops.h"

namespace spore::nn {
namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void check_name(const std::string& what, const std::string& name) {
  SPORE_CHECK(!name.empty() && name.find('.') == std::string::npos, "[Cell] ", what,
              " name must be non-empty and contain no '.', got '", name, "'");
}

// "spore::models::LeNet5" -> "LeNet5": the class name for cells that did not set one.
std::string demangled_name(const std::type_info& ti) {
  int status = 0;
  char* d = abi::__cxa_demangle(ti.name(), nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : ti.name();
  std::free(d);
  const auto tpl = s.find('<');
  const auto colon = s.rfind("::", tpl);
  if (colon != std::string::npos) s = s.substr(colon + 2);
  return s;
}

}  // namespace

Tensor Cell::construct(const Tensor&) {
  SPORE_THROW(ErrorKind::NotImplemented, "[", cls_name(),
              "] construct(x) is not defined for this cell; override construct(const Tensor&)");
}
Tensor Cell::construct(const Tensor&, const Tensor&) {
  SPORE_THROW(ErrorKind::NotImplemented, "[", cls_name(),
              "] construct(x, y) is not defined for this cell; override construct(const Tensor&, "
              "const Tensor&)");
}
std::vector<Tensor> Cell::forward(const std::vector<Tensor>& inputs) {
  std::optional<amp::PolicyScope> scope;
  if (amp_) scope.emplace(*amp_);
  if (inputs.size() == 1) return {construct(inputs[0])};
  if (inputs.size() == 2) return {construct(inputs[0], inputs[1])};
  SPORE_THROW(ErrorKind::NotImplemented, "[", cls_name(), "] forward() got ", inputs.size(),
              " inputs; the default handles 1 or 2, override forward() for more");
}

Cell& Cell::to_float(DType dtype) {
  SPORE_CHECK_TYPE(dtype == kFloat16 || dtype == kBFloat16 || dtype == kFloat32, "[", cls_name(),
                   "] to_float expects float16, bfloat16 or float32, got ", dtype_name(dtype));
  // float32: O2's float32-cell policy (inputs cast to float32; norm ops keep a low-precision data
  // input and compute in float32), which also overrides a low-precision parent.
  const amp::Policy p = dtype == kFloat32 ? amp::Policy{amp::Level::O2, kFloat16, true}
                                          : amp::Policy{amp::Level::O3, dtype};
  for (auto& [_, c] : named_cells()) c->set_amp_policy(p);
  return *this;
}

// ---- registration ------------------------------------------------------------------------------
Tensor& Cell::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name("parameter", name);
  SPORE_CHECK(t.defined(), "[Cell] parameter '", name, "' is an undefined tensor");
  for (auto& [n, _] : params_)
    SPORE_CHECK(n != name, "[Cell] parameter '", name, "' is already registered in ", cls_name());
  SPORE_CHECK_TYPE(!requires_grad || is_floating(t.dtype()), "[Cell] parameter '", name,
                   "' must be floating-point to require gradients, got ", dtype_name(t.dtype()));
  if (!t.is_leaf()) t = t.detach();  // a parameter is a leaf of every graph
  t.set_requires_grad(requires_grad);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Cell::register_buffer(const std::string& name, Tensor t) {
  check_name("buffer", name);
  SPORE_CHECK(t.defined(), "[Cell] buffer '", name, "' is an undefined tensor");
  for (auto& [n, _] : buffers_)
    SPORE_CHECK(n != name, "[Cell] buffer '", name, "' is already registered in ", cls_name());
  if (!t.is_leaf() || t.requires_grad()) t = t.detach();
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Cell::register_cell(const std::string& name, Cell& cell) {
  check_name("cell", name);
  SPORE_CHECK(&cell != this, "[Cell] a cell cannot be registered inside itself ('", name, "')");
  for (auto& [n, _] : cells_)
    SPORE_CHECK(n != name, "[Cell] sub-cell '", name, "' is already registered in ", cls_name());
  cells_.emplace_back(name, &cell);
}

void Cell::register_cell(const std::string& name, std::shared_ptr<Cell> cell) {
  SPORE_CHECK(cell != nullptr, "[Cell] sub-cell '", name, "' is null");
  register_cell(name, *cell);
  owned_.push_back(std::move(cell));
}

Tensor& Cell::parameter(const std::string& name) {
  // A dotted name ("fc1.weight") walks down the sub-cells.
  if (auto dot = name.find('.'); dot != std::string::npos) {
    const std::string head = name.substr(0, dot);
    for (auto& [n, c] : cells_)
      if (n == head) return c->parameter(name.substr(dot + 1));
    SPORE_THROW(ErrorKind::ValueError, "[", cls_name(), "] has no sub-cell '", head,
                "' (looking up '", name, "')");
  }
  for (auto& [n, t] : params_)
    if (n == name) return t;
  std::string have;
  for (auto& [n, _] : params_) have += (have.empty() ? "" : ", ") + n;
  SPORE_THROW(ErrorKind::ValueError, "[", cls_name(), "] has no parameter '", name,
              "' (it has: ", have.empty() ? "none" : have, ")");
}

Tensor& Cell::buffer(const std::string& name) {
  if (auto dot = name.find('.'); dot != std::string::npos) {
    const std::string head = name.substr(0, dot);
    for (auto& [n, c] : cells_)
      if (n == head) return c->buffer(name.substr(dot + 1));
    SPORE_THROW(ErrorKind::ValueError, "[", cls_name(), "] has no sub-cell '", head,
                "' (looking up '", name, "')");
  }
  for (auto& [n, t] : buffers_)
    if (n == name) return t;
  SPORE_THROW(ErrorKind::ValueError, "[", cls_name(), "] has no buffer '", name, "'");
}

// ---- walks -------------------------------------------------------------------------------------
std::vector<std::pair<std::string, Cell*>> Cell::named_cells(const std::string& prefix) const {
  std::vector<std::pair<std::string, Cell*>> out;
  std::set<const Cell*> seen;
  struct Walk {
    std::vector<std::pair<std::string, Cell*>>& out;
    std::set<const Cell*>& seen;
    void operator()(const std::string& name, const Cell* c) {
      if (!seen.insert(c).second) return;
      out.emplace_back(name, const_cast<Cell*>(c));
      for (auto& [n, sub] : c->cells_) (*this)(join(name, n), sub);
    }
  };
  Walk{out, seen}(prefix, this);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Cell::named_parameters(
    const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<const TensorImpl*> seen;
  for (auto& [cname, c] : named_cells(prefix))
    for (auto& [n, t] : c->params_)
      if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(join(cname, n), t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Cell::named_buffers(const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<const TensorImpl*> seen;
  for (auto& [cname, c] : named_cells(prefix))
    for (auto& [n, t] : c->buffers_)
      if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(join(cname, n), t);
  return out;
}

std::vector<Tensor> Cell::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<Tensor> Cell::trainable_params() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Cell::parameters_and_buffers() const {
  auto out = named_parameters();
  for (auto& nb : named_buffers()) out.push_back(nb);
  return out;
}

// ---- mode and dtype ----------------------------------------------------------------------------
void Cell::set_train(bool mode) {
  training_ = mode;
  for (auto& [_, c] : cells_) c->set_train(mode);
}

void Cell::to(DType dtype) {
  SPORE_CHECK_TYPE(is_floating(dtype), "[", cls_name(), ".to] expected a floating dtype, got ",
                   dtype_name(dtype));
  NoGradGuard no_grad;
  // New tensors go into the registered slots, so parameter("weight") keeps naming the live one.
  auto cast_slot = [&](Tensor& t) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) return;
    const bool rg = t.requires_grad();
    Tensor c = t.detach().to(dtype).detach();
    c.set_requires_grad(rg);
    t = c;
  };
  for (auto& [_, t] : params_) cast_slot(t);
  for (auto& [_, t] : buffers_) cast_slot(t);
  for (auto& [_, c] : cells_) c->to(dtype);
}

void Cell::to(Device device) {
  NoGradGuard no_grad;
  auto move_slot = [&](Tensor& t) {
    if (!t.defined() || t.device() == device) return;
    const Tensor moved = t.detach().to(device);
    TensorImpl& impl = t.impl();
    impl.storage = moved.impl().storage;
    impl.offset = moved.offset();
    impl.strides = moved.strides();
    impl.device = device;
    impl.grad.reset();
  };
  for (auto& [_, t] : params_) move_slot(t);
  for (auto& [_, t] : buffers_) move_slot(t);
  for (auto& [_, c] : cells_) c->to(device);
}

// MindSpore's __repr__: Name<extend_repr> for a leaf; for a parent the sub-cells one per line,
// "(name): repr", indented two spaces, closed by "  >".
std::string Cell::str(int indent) const {
  const std::string name = cls_name_ == "Cell" ? demangled_name(typeid(*this)) : cls_name_;
  const std::string extra = extend_repr();
  std::string s = name + "<";
  if (cells_.empty()) return s + extra + ">";
  const std::string pad(size_t(indent) + 2, ' ');
  s += "\n";
  if (!extra.empty()) s += pad + extra + "\n";
  for (auto& [n, c] : cells_) s += pad + "(" + n + "): " + c->str(indent + 2) + "\n";
  return s + pad + ">";
}

std::string Cell::trace_key() const {
  std::string k = training() ? "T" : "E";
  if (amp_policy()) k += amp_policy()->str();
  if (recompute_) k += 'R';
  for (const auto& [name, c] : named_cells()) {
    k += c->training() ? 'T' : 'E';
    if (c->amp_policy()) k += c->amp_policy()->str();  // the traced casts depend on it
    if (c->is_recompute()) k += 'R';                   // and the recompute marks
  }
  return k;
}

}  // namespace spore::nn
