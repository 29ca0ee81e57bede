// ONNX export (spore/onnx.h): trace the network in inference mode into Spore's IR, drop dead
// nodes, and write each IR node as ONNX nodes of opset 17. Parameters and buffers become
// initializers under their Spore names; other captured tensors "const_<id>".
//
// Dynamic batch: the network is traced with a batch of kTraceBatch (a size no layer of the zoo
// has), so every dimension equal to it is the batch: it becomes "N" on the graph's input and
// output, Reshape targets get -1 there, Slices along it run to the end. A constant whose shape
// holds the batch cannot be made dynamic and is an error suggesting dynamic_batch = false.
//
// To map another IR op: a case in emit_node (and a row in the test's list of exported ops).
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include "graph/ir.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "onnx/onnx_util.h"
#include "spore/onnx.h"
#include "spore/ops.h"
#include "spore/version.h"

namespace spore {
namespace {

using graph::Node;
using graph::Value;
using graph::ValueKind;
using ops::OpId;
constexpr int64_t kTraceBatch = 97;

class Exporter {
 public:
  Exporter(::onnx::GraphProto* g, bool dynamic, int64_t batch)
      : g_(g), dynamic_(dynamic), batch_(batch) {}

  std::map<const Value*, std::string> names;

  const std::string& name(const Value* v) {
    auto it = names.find(v);
    if (it != names.end()) return it->second;
    return names[v] = "v" + std::to_string(v->id);
  }
  std::string fresh(const std::string& stem) { return stem + "_" + std::to_string(counter_++); }

  // An int64 1-D constant as an initializer; returns its name.
  std::string ints(const std::vector<int64_t>& v) {
    const std::string n = fresh("c");
    auto* t = g_->add_initializer();
    t->set_name(n);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return n;
  }
  // A scalar constant of dtype dt.
  std::string scalar(double v, DType dt) {
    const std::string n = fresh("s");
    Tensor t = full({}, v, dt);
    onnx_detail::to_tensor_proto(t, n, g_->add_initializer());
    return n;
  }

  ::onnx::NodeProto* add(const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(fresh(op));
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void attr(::onnx::NodeProto* n, const char* k, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto* n, const char* k, double v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(float(v));
  }
  static void attr(::onnx::NodeProto* n, const char* k, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr(::onnx::NodeProto* n, const char* k, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  // A shape for Reshape: the batch dimension (dim 0 equal to the trace batch) becomes -1.
  std::vector<int64_t> dyn_shape(const Shape& s) const {
    std::vector<int64_t> r(s.begin(), s.end());
    if (dynamic_ && !r.empty() && r[0] == batch_) r[0] = -1;
    return r;
  }

  void emit(const Node& n);

 private:
  ::onnx::GraphProto* g_;
  bool dynamic_;
  int64_t batch_;
  int counter_ = 0;
};

[[noreturn]] void unsupported(const Node& n, const std::string& why = "") {
  SPORE_THROW(ErrorKind::NotImplemented, "[export_onnx] the traced graph has op ", n.def().name,
              " (", n.attrs.str(), ") which has no ONNX mapping", why.empty() ? "" : ": " + why,
              "; export a network without it, or add a case to src/onnx/export.cpp");
}

// Spore pads (top, bottom, left, right) -> ONNX (top, left, bottom, right).
std::vector<int64_t> onnx_pads(const std::vector<int64_t>& p) { return {p[0], p[2], p[1], p[3]}; }

void Exporter::emit(const Node& n) {
  auto in = [&](size_t i) { return name(n.inputs[i]); };
  auto out = [&](size_t i) { return name(n.outputs[i]); };
  const auto& a = n.attrs;
  auto unary = [&](const char* op) { add(op, {in(0)}, {out(0)}); };
  auto binary = [&](const char* op) { add(op, {in(0), in(1)}, {out(0)}); };
  auto reduce = [&](const char* op, bool axes_input) {
    const std::vector<int64_t> axes = a.get_ints("axes", {});
    std::vector<std::string> ins{in(0)};
    if (axes_input && !axes.empty()) ins.push_back(ints(axes));
    auto* p = add(op, ins, {out(0)});
    if (!axes_input && !axes.empty()) attr(p, "axes", axes);
    attr(p, "keepdims", int64_t(a.get_bool("keepdims", false)));
  };
  const DType dt = n.outputs.empty() ? kFloat32 : n.outputs[0]->dtype;
  switch (n.op) {
    case OpId::Neg:
      return unary("Neg");
    case OpId::Abs:
      return unary("Abs");
    case OpId::Exp:
      return unary("Exp");
    case OpId::Log:
      return unary("Log");
    case OpId::Sqrt:
      return unary("Sqrt");
    case OpId::Sin:
      return unary("Sin");
    case OpId::Cos:
      return unary("Cos");
    case OpId::Tanh:
      return unary("Tanh");
    case OpId::Sigmoid:
      return unary("Sigmoid");
    case OpId::Relu:
      return unary("Relu");
    case OpId::Floor:
      return unary("Floor");
    case OpId::Ceil:
      return unary("Ceil");
    case OpId::Round:
      return unary("Round");
    case OpId::Sign:
      return unary("Sign");
    case OpId::Erf:
      return unary("Erf");
    case OpId::LogicalNot:
      return unary("Not");
    case OpId::Copy:
      return unary("Identity");
    case OpId::Rsqrt: {
      const std::string s = fresh("sqrt");
      add("Sqrt", {in(0)}, {s});
      add("Reciprocal", {s}, {out(0)});
      return;
    }
    case OpId::LeakyRelu: {
      attr(add("LeakyRelu", {in(0)}, {out(0)}), "alpha", a.get_float("alpha", 0.01));
      return;
    }
    case OpId::Silu: {
      const std::string s = fresh("sig");
      add("Sigmoid", {in(0)}, {s});
      add("Mul", {in(0), s}, {out(0)});
      return;
    }
    case OpId::Gelu: {
      const std::string x = in(0);
      if (a.get_bool("approximate", false)) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        const std::string x3 = fresh("x3"), inner = fresh("in"), sc = fresh("sc"), th = fresh("th"),
                          one = fresh("one"), h = fresh("h");
        const std::string x2 = fresh("x2");
        add("Mul", {x, x}, {x2});
        add("Mul", {x2, x}, {x3});
        const std::string t = fresh("t");
        add("Mul", {x3, scalar(0.044715, dt)}, {t});
        add("Add", {x, t}, {inner});
        add("Mul", {inner, scalar(std::sqrt(2.0 / M_PI), dt)}, {sc});
        add("Tanh", {sc}, {th});
        add("Add", {th, scalar(1.0, dt)}, {one});
        add("Mul", {x, one}, {h});
        add("Mul", {h, scalar(0.5, dt)}, {out(0)});
      } else {  // 0.5 x (1 + erf(x / sqrt(2)))
        const std::string d = fresh("d"), e = fresh("e"), one = fresh("one"), h = fresh("h");
        add("Mul", {x, scalar(M_SQRT1_2, dt)}, {d});
        add("Erf", {d}, {e});
        add("Add", {e, scalar(1.0, dt)}, {one});
        add("Mul", {x, one}, {h});
        add("Mul", {h, scalar(0.5, dt)}, {out(0)});
      }
      return;
    }
    case OpId::Softplus: {
      const double beta = a.get_float("beta", 1.0);
      if (beta == 1.0) return unary("Softplus");
      const std::string bx = fresh("bx"), sp = fresh("sp");
      add("Mul", {in(0), scalar(beta, dt)}, {bx});
      add("Softplus", {bx}, {sp});
      add("Div", {sp, scalar(beta, dt)}, {out(0)});
      return;
    }
    case OpId::Clamp: {
      std::vector<std::string> ins{in(0)};
      ins.push_back(a.has("min") ? scalar(a.get_float("min"), dt) : "");
      if (a.has("max")) ins.push_back(scalar(a.get_float("max"), dt));
      add("Clip", ins, {out(0)});
      return;
    }
    case OpId::Cast: {
      attr(add("Cast", {in(0)}, {out(0)}), "to",
           int64_t(onnx_detail::onnx_dtype(a.get_dtype("dtype"))));
      return;
    }
    case OpId::Add:
      return binary("Add");
    case OpId::Sub:
      return binary("Sub");
    case OpId::Mul:
      return binary("Mul");
    case OpId::Div:
      return binary("Div");
    case OpId::Pow:
      return binary("Pow");
    case OpId::Maximum:
      return binary("Max");
    case OpId::Minimum:
      return binary("Min");
    case OpId::Equal:
      return binary("Equal");
    case OpId::Less:
      return binary("Less");
    case OpId::LessEqual:
      return binary("LessOrEqual");
    case OpId::Greater:
      return binary("Greater");
    case OpId::GreaterEqual:
      return binary("GreaterOrEqual");
    case OpId::LogicalAnd:
      return binary("And");
    case OpId::LogicalOr:
      return binary("Or");
    case OpId::LogicalXor:
      return binary("Xor");
    case OpId::NotEqual: {
      const std::string e = fresh("eq");
      add("Equal", {in(0), in(1)}, {e});
      add("Not", {e}, {out(0)});
      return;
    }
    case OpId::Where:
      add("Where", {in(0), in(1), in(2)}, {out(0)});
      return;
    case OpId::Sum:
      return reduce("ReduceSum", true);
    case OpId::Mean:
      return reduce("ReduceMean", false);
    case OpId::Max:
      return reduce("ReduceMax", false);
    case OpId::Min:
      return reduce("ReduceMin", false);
    case OpId::Prod:
      return reduce("ReduceProd", false);
    case OpId::Argmax:
    case OpId::Argmin: {
      auto* p = add(n.op == OpId::Argmax ? "ArgMax" : "ArgMin", {in(0)}, {out(0)});
      attr(p, "axis", a.get_int("axis"));
      attr(p, "keepdims", int64_t(a.get_bool("keepdims", false)));
      return;
    }
    case OpId::Reshape:
      add("Reshape", {in(0), ints(dyn_shape(n.outputs[0]->shape))}, {out(0)});
      return;
    case OpId::Permute:
      attr(add("Transpose", {in(0)}, {out(0)}), "perm", a.get_ints("axes"));
      return;
    case OpId::Slice: {
      const int64_t d = ops::normalize_axis(a.get_int("dim"), int64_t(n.inputs[0]->shape.size()));
      int64_t end = a.get_int("end");
      if (dynamic_ && d == 0 && n.inputs[0]->shape[0] == batch_ && end >= batch_)
        end = std::numeric_limits<int64_t>::max();
      add("Slice",
          {in(0), ints({a.get_int("start")}), ints({end}), ints({d}), ints({a.get_int("step", 1)})},
          {out(0)});
      return;
    }
    case OpId::Expand: {
      std::vector<int64_t> s(n.outputs[0]->shape.begin(), n.outputs[0]->shape.end());
      if (dynamic_ && !s.empty() && s[0] == batch_) {
        if (n.inputs[0]->shape.size() != s.size() || n.inputs[0]->shape[0] != batch_)
          unsupported(n,
                      "it broadcasts a constant over the batch; export with dynamic_batch = false");
        s[0] = 1;  // ONNX Expand broadcasts both ways: 1 keeps the input's batch
      }
      add("Expand", {in(0), ints(s)}, {out(0)});
      return;
    }
    case OpId::Matmul:
      return binary("MatMul");
    case OpId::Conv2d: {
      std::vector<std::string> ins{in(0), in(1)};
      if (n.inputs.size() > 2) ins.push_back(in(2));
      auto* p = add("Conv", ins, {out(0)});
      const Shape& w = n.inputs[1]->shape;  // (O, I/g, kh, kw)
      attr(p, "kernel_shape", std::vector<int64_t>{w[2], w[3]});
      attr(p, "strides", a.get_ints("stride"));
      attr(p, "pads", onnx_pads(a.get_ints("padding")));
      attr(p, "dilations", a.get_ints("dilation"));
      attr(p, "group", a.get_int("groups", 1));
      return;
    }
    case OpId::MaxPool2d:
    case OpId::AvgPool2d: {
      const bool max = n.op == OpId::MaxPool2d;
      auto* p = add(max ? "MaxPool" : "AveragePool", {in(0)}, {out(0)});
      attr(p, "kernel_shape", a.get_ints("kernel_size"));
      attr(p, "strides", a.get_ints("stride"));
      attr(p, "pads", onnx_pads(a.get_ints("padding")));
      attr(p, "ceil_mode", int64_t(a.get_bool("ceil_mode", false)));
      if (!max) attr(p, "count_include_pad", int64_t(a.get_bool("count_include_pad", true)));
      return;
    }
    case OpId::AdaptiveAvgPool2d: {
      const auto os = a.get_ints("output_size");
      const Shape& x = n.inputs[0]->shape;
      if (os[0] == 1 && os[1] == 1) return unary("GlobalAveragePool");
      if (x[2] % os[0] || x[3] % os[1])
        unsupported(n, "the input size is not a multiple of the output size");
      auto* p = add("AveragePool", {in(0)}, {out(0)});
      attr(p, "kernel_shape", std::vector<int64_t>{x[2] / os[0], x[3] / os[1]});
      attr(p, "strides", std::vector<int64_t>{x[2] / os[0], x[3] / os[1]});
      return;
    }
    case OpId::BatchNormInference: {
      attr(add("BatchNormalization", {in(0), in(1), in(2), in(3), in(4)}, {out(0)}), "epsilon",
           a.get_float("eps"));
      return;
    }
    case OpId::LayerNorm: {
      auto* p = add("LayerNormalization", {in(0), in(1), in(2)}, {out(0)});
      attr(p, "axis", -a.get_int("normalized_ndim"));
      attr(p, "epsilon", a.get_float("eps", 1e-5));
      return;
    }
    case OpId::Softmax:
      attr(add("Softmax", {in(0)}, {out(0)}), "axis", a.get_int("axis"));
      return;
    case OpId::LogSoftmax:
      attr(add("LogSoftmax", {in(0)}, {out(0)}), "axis", a.get_int("axis"));
      return;
    case OpId::Concat: {
      std::vector<std::string> ins;
      for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(in(i));
      attr(add("Concat", ins, {out(0)}), "axis", a.get_int("axis"));
      return;
    }
    case OpId::Split: {
      std::vector<std::string> outs;
      for (size_t i = 0; i < n.outputs.size(); ++i) outs.push_back(out(i));
      attr(add("Split", {in(0), ints(a.get_ints("sizes"))}, outs), "axis", a.get_int("axis"));
      return;
    }
    case OpId::Gather:
      attr(add("GatherElements", {in(0), in(1)}, {out(0)}), "axis", a.get_int("axis"));
      return;
    case OpId::IndexSelect:
      attr(add("Gather", {in(0), in(1)}, {out(0)}), "axis", a.get_int("axis"));
      return;
    case OpId::Pad: {
      // Spore: (before, after) per dim from the last dim backwards (as torch.nn.functional.pad);
      // ONNX: all befores then all afters, first dim first.
      const auto p = a.get_ints("pads");
      const size_t r = n.inputs[0]->shape.size();
      std::vector<int64_t> on(2 * r, 0);
      for (size_t k = 0; 2 * k + 1 < p.size() && k < r; ++k) {
        on[r - 1 - k] = p[2 * k];
        on[2 * r - 1 - k] = p[2 * k + 1];
      }
      add("Pad", {in(0), ints(on), scalar(a.get_float("value", 0), dt)}, {out(0)});
      return;
    }
    case OpId::UpsampleNearest2d: {
      const Shape& x = n.inputs[0]->shape;
      const auto os = a.get_ints("output_size");
      Tensor sc = tensor({1.0, 1.0, double(os[0]) / double(x[2]), double(os[1]) / double(x[3])});
      const std::string sn = fresh("scales");
      onnx_detail::to_tensor_proto(sc, sn, g_->add_initializer());
      auto* p = add("Resize", {in(0), "", sn}, {out(0)});
      attr(p, "mode", std::string("nearest"));
      attr(p, "coordinate_transformation_mode", std::string("asymmetric"));
      attr(p, "nearest_mode", std::string("floor"));
      return;
    }
    case OpId::Cumsum: {
      auto* p = add("CumSum", {in(0), ints({a.get_int("axis")})}, {out(0)});
      // a 1-element tensor works as the axis in every runtime; ONNX asks for a scalar
      g_->mutable_initializer(g_->initializer_size() - 1)->clear_dims();
      attr(p, "reverse", int64_t(a.get_bool("reverse", false)));
      return;
    }
    default:
      unsupported(n);
  }
}

void set_value_info(::onnx::ValueInfoProto* vi, const std::string& name, const Shape& shape,
                    DType dt, bool dynamic, int64_t batch) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_detail::onnx_dtype(dt));
  auto* sh = tt->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    auto* d = sh->add_dim();
    if (dynamic && i == 0 && shape[0] == batch)
      d->set_dim_param("N");
    else
      d->set_dim_value(shape[i]);
  }
}

}  // namespace

void export_onnx(nn::Cell& net, const Tensor& example, const std::string& path,
                 const OnnxExportOptions& opts) {
  SPORE_CHECK(example.defined() && example.dim() >= 1,
              "[export_onnx] the example input must be a tensor "
              "with a batch dimension, got ",
              example.defined() ? shape_str(example.shape()) : "undefined");
  SPORE_CHECK(opts.opset >= 17, "[export_onnx] opset ", opts.opset,
              " is not supported; Spore writes opset 17 "
              "or newer (LayerNormalization needs 17)");
  Shape shape = example.shape();
  const int64_t batch = opts.dynamic_batch ? kTraceBatch : shape[0];
  shape[0] = batch;
  const bool was_training = net.training();
  net.set_train(false);
  std::unique_ptr<graph::Graph> g;
  try {
    g = graph::trace([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{net(a[0])}; },
                     {Tensor::empty(shape, example.dtype())}, "export");
  } catch (...) {
    net.set_train(was_training);
    throw;
  }
  net.set_train(was_training);
  graph::dead_code_elimination(*g);
  g->remove_unused_inputs();

  ::onnx::ModelProto model;
  model.set_ir_version(8);  // ONNX 1.10+ readers; opset 17 needs IR 8
  model.set_producer_name("spore");
  model.set_producer_version(SPORE_VERSION);
  auto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opts.opset);
  auto* gp = model.mutable_graph();
  gp->set_name(opts.graph_name);
  Exporter ex(gp, opts.dynamic_batch, batch);

  // Names: parameters and buffers by their Spore names.
  const auto named = net.parameters_and_buffers();
  for (Value* v : g->inputs) {
    if (v->kind == ValueKind::kPlaceholder) {
      ex.names[v] = opts.input_name;
      set_value_info(gp->add_input(), opts.input_name, v->shape, v->dtype, opts.dynamic_batch,
                     batch);
      continue;
    }
    std::string nm;
    for (const auto& [pn, t] : named)
      if (t.is_same(v->tensor)) nm = pn;
    if (nm.empty()) nm = "const_" + std::to_string(v->id);
    SPORE_CHECK(!(opts.dynamic_batch && !v->shape.empty() && v->shape[0] == batch),
                "[export_onnx] the "
                "network makes a constant of shape ",
                shape_str(v->shape),
                " that depends on the batch size; "
                "export with a fixed batch (OnnxExportOptions.dynamic_batch = false, `spore export "
                "--static-batch`)");
    ex.names[v] = nm;
    onnx_detail::to_tensor_proto(v->tensor, nm, gp->add_initializer());
  }
  SPORE_CHECK(g->outputs.size() == 1, "[export_onnx] expected one output, the network returned ",
              g->outputs.size());
  const Value* o = g->outputs[0];
  if (o->is_input()) {  // the network returned an input or a parameter unchanged
    ex.add("Identity", {ex.name(o)}, {opts.output_name});
  } else {
    ex.names[o] = opts.output_name;
  }
  for (const auto& n : g->nodes) ex.emit(*n);
  set_value_info(gp->add_output(), opts.output_name, o->shape, o->dtype, opts.dynamic_batch, batch);

  std::string bytes;
  SPORE_CHECK_KIND(ErrorKind::IOError, model.SerializeToString(&bytes),
                   "[export_onnx] protobuf could not "
                   "serialize the model (over 2 GiB?)");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[export_onnx] cannot create ", path, ": ",
                   std::strerror(errno), "; choose a path in a folder you can write to");
  f.write(bytes.data(), std::streamsize(bytes.size()));
  f.close();
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[export_onnx] writing ", path,
                   " failed (disk full?)");
}

}  // namespace spore
