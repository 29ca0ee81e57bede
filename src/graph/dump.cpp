// The text form of a graph and SPORE_DUMP_IR: one line per input, node and output, e.g.
//   %3: f32(64, 6, 28, 28) = conv2d(%0, %1) {dilation=(1, 1), ...}
//   apply_momentum(%1, %9, %40) {lr=0.01, ...}        <- an effect (no outputs)
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/ir.h"

namespace spore::graph {
namespace {
std::string type_str(const Value* v) {
  std::string s = std::string(dtype_name(v->dtype)) + shape_str(v->shape);
  if (!v->is_contiguous()) s += " strides" + shape_str(v->strides);
  return s;
}
std::string ref(const Value* v) { return "%" + std::to_string(v->id); }
}  // namespace

std::string to_text(const Graph& g) {
  std::ostringstream os;
  os << "graph " << g.name << " (" << g.inputs.size() << " inputs, " << g.nodes.size() << " nodes, "
     << g.outputs.size() << " outputs)\n";
  for (const Value* v : g.inputs) {
    os << "  " << ref(v) << ": " << type_str(v) << " = ";
    if (v->kind == ValueKind::kPlaceholder)
      os << "arg[" << v->arg_index << "]\n";
    else if (v->kind == ValueKind::kConstant)
      os << "constant\n";
    else
      os << "capture\n";
  }
  for (const auto& n : g.nodes) {
    os << "  ";
    for (size_t i = 0; i < n->outputs.size(); ++i)
      os << (i ? ", " : "") << ref(n->outputs[i]) << ": " << type_str(n->outputs[i]);
    if (!n->outputs.empty()) os << " = ";
    os << n->def().name << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) os << (i ? ", " : "") << ref(n->inputs[i]);
    os << ")";
    if (!n->attrs.items().empty()) os << " {" << n->attrs.str() << "}";
    if (n->precision != nullptr) os << " [amp " << n->precision->str() << "]";
    if (n->is_effect()) os << "  # effect";
    os << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : " ") << ref(g.outputs[i]);
  os << "\n";
  return os.str();
}

void dump_if_enabled(const Graph& g, int index, const std::string& stage) {
  const char* dir = std::getenv("SPORE_DUMP_IR");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char idx[16];
  std::snprintf(idx, sizeof idx, "%02d", index);
  std::ofstream f(std::filesystem::path(dir) / (g.name + "." + idx + "." + stage + ".txt"));
  SPORE_CHECK(f.good(), "SPORE_DUMP_IR: cannot write to directory '", dir, "'");
  f << to_text(g);
}

}  // namespace spore::graph
