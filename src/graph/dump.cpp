// The text form of a graph and the IR dumps (set_context save_graphs / SPORE_DUMP_IR): one line
// per input, node and output, e.g.
//   %3: f32(64, 6, 28, 28) = conv2d(%0, %1) {dilation=(1, 1), ...}
//   apply_momentum(%1, %9, %40) {lr=0.01, ...}        <- an effect (no outputs)
// and, for the final stage, a Graphviz .dot (dot -Tsvg <file>.dot > graph.svg).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/ir.h"
#include "spore/context.h"

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

std::string to_dot(const Graph& g) {
  std::ostringstream os;
  auto label = [](std::string s) {  // quotes escaped for a dot string
    std::string out;
    for (char c : s) out += c == '"' ? std::string("\\\"") : std::string(1, c);
    return out;
  };
  os << "digraph \"" << label(g.name)
     << "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const Value* v : g.inputs)
    os << "  v" << v->id << " [shape=ellipse, label=\"" << ref(v) << " "
       << (v->kind == ValueKind::kPlaceholder ? "arg"
           : v->kind == ValueKind::kConstant  ? "const"
                                              : "capture")
       << "\\n"
       << label(type_str(v)) << "\"];\n";
  for (const auto& n : g.nodes) {
    os << "  n" << n->id << " [label=\"" << label(n->def().name);
    for (const Value* o : n->outputs) os << "\\n" << ref(o) << ": " << label(type_str(o));
    os << "\"" << (n->is_effect() ? ", style=dashed" : "") << "];\n";
    for (const Value* in : n->inputs)
      os << "  "
         << (in->producer ? "n" + std::to_string(in->producer->id) : "v" + std::to_string(in->id))
         << " -> n" << n->id << ";\n";
  }
  for (const Value* o : g.outputs)
    os << "  "
       << (o->producer ? "n" + std::to_string(o->producer->id) : "v" + std::to_string(o->id))
       << " -> out" << o->id << ";\n  out" << o->id << " [shape=plaintext, label=\"return "
       << ref(o) << "\"];\n";
  os << "}\n";
  return os.str();
}

void dump_if_enabled(const Graph& g, int index, const std::string& stage) {
  const std::string dir = save_graphs_path();
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char idx[16];
  std::snprintf(idx, sizeof idx, "%02d", index);
  const auto base = std::filesystem::path(dir) / (g.name + "." + idx + "." + stage);
  std::ofstream f(base.string() + ".txt");
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[save_graphs] cannot write to folder '", dir,
                   "'; give save_graphs_path (or SPORE_DUMP_IR) a writable folder");
  f << to_text(g);
  if (stage == "final") std::ofstream(base.string() + ".dot") << to_dot(g);
}

}  // namespace spore::graph
