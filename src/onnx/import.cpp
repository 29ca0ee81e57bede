// ONNX import (spore/onnx.h). load() parses the ModelProto and checks it as hostile input: a
// graph must exist, every node input must name a graph input, an initializer or an earlier
// node's output, and every initializer must hold as many bytes as its dims say. run() interprets
// the nodes in order by calling Spore's ops (ops_onnx.cpp has one handler per ONNX op type), under
// jit in Graph mode so the model is traced into Spore's IR, optimised by the passes and run by
// the executor; one compiled graph per input signature.
//
// The model runs where its inputs are (OnnxModel::run): on a device, its weights are uploaded there
// once per device (op by op) or into the compiled graph (Graph mode), and the values the handlers
// make (constants, shapes) are made there too.
//
// Values computed only from constants (initializers, Constant nodes, Shape of a traced tensor)
// are computed on the spot, outside the trace, so that Reshape targets, Slice bounds and the
// like are known numbers when the graph is built.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "onnx/import_internal.h"
#include "onnx/onnx_util.h"
#include "ops/op.h"
#include "spore/context.h"
#include "spore/jit.h"
#include "spore/onnx.h"

namespace spore {

// The newest default-domain opset of any ONNX release (1.18: opset 23). The op handlers follow each
// opset's changes up to it (attribute-to-input moves at 10, 11, 13 and 18; later ones add types and
// attributes that the handlers check one by one).
constexpr int64_t kNewestOnnxOpset = 23;

using onnx_detail::Ctx;
using onnx_detail::NoTrace;

struct OnnxModel::Impl {
  std::string path;
  ::onnx::GraphProto graph;
  int64_t opset = 0;
  std::map<std::string, Tensor> initializers;
  std::vector<OnnxValueInfo> inputs, outputs;
  std::unique_ptr<JitFunction> jit;
  // Graph mode: small integer and bool inputs (shapes, axes, indices, flags) are compile-time
  // values: baked into the graph and part of the cache key, so ops that need numbers get them.
  std::vector<Tensor> host;  // per input: the value, or undefined for a traced input
  std::string host_key;
  // Where the current run happens, and the initializers uploaded to each device (op by op).
  Device device;
  std::map<std::string, std::map<std::string, Tensor>> device_weights;

  // The initializers on `device` (uploaded at the first run there).
  const std::map<std::string, Tensor>& weights_on(Device device);
  std::vector<Tensor> interpret(const std::vector<Tensor>& args);
};

namespace {

// `what` is "graph input" or "graph output".
OnnxValueInfo value_info(const ::onnx::ValueInfoProto& v, const std::string& where,
                         const char* what) {
  OnnxValueInfo info;
  info.name = v.name();
  SPORE_CHECK_KIND(ErrorKind::IOError, v.has_type(), where, what, " \"", v.name(),
                   "\": field type is missing");
  SPORE_CHECK_KIND(ErrorKind::NotImplemented, v.type().has_tensor_type(), where, what, " \"",
                   v.name(),
                   "\": unsupported ONNX type (a sequence, map or optional); Spore's importer "
                   "takes tensors only");
  const auto& tt = v.type().tensor_type();
  info.onnx_type = onnx_detail::onnx_dtype_name(tt.elem_type());
  bool widened = false;
  SPORE_CHECK_KIND(ErrorKind::NotImplemented,
                   onnx_detail::dtype_from_onnx(tt.elem_type(), &info.dtype, &widened), where, what,
                   " \"", v.name(), "\": field elem_type: unsupported ONNX type ", info.onnx_type,
                   " tensors");
  // Inside a model, INT16 / UINT16 values are held as int32 and UINT32 / UINT64 as int64 (exact
  // for their values); at the model's boundary that would hand the caller another dtype than the
  // model declares, so such a model is refused.
  SPORE_CHECK_KIND(ErrorKind::NotImplemented, !widened, where, what, " \"", v.name(),
                   "\": field elem_type: unsupported ONNX type ", info.onnx_type,
                   " tensors as a graph input or output (Spore has no ",
                   dtype_name(info.dtype) == std::string("int32") ? "16-bit" : "unsigned 32/64-bit",
                   " integer dtype; cast the model's inputs and outputs to INT32 or INT64)");
  if (tt.has_shape()) {
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
      if (i) info.dim_names += ",";
      info.dim_names += d.has_dim_value() ? std::to_string(d.dim_value()) : d.dim_param();
    }
  }
  return info;
}

}  // namespace

OnnxModel OnnxModel::load(const std::string& path) {
  const std::string where = "[onnx] " + path + ": ";
  const std::string bytes = onnx_detail::read_file(path, "onnx");
  SPORE_CHECK_KIND(
      ErrorKind::IOError, bytes.size() < (size_t(1) << 31), where, "the file is ", bytes.size(),
      " bytes; protobuf models are limited to 2 GiB (larger ones keep weights in external data, "
      "which Spore does not read)");
  SPORE_CHECK_KIND(ErrorKind::IOError, !bytes.empty(), where,
                   "the file is empty (0 bytes); expected an ONNX model (a protobuf ModelProto)");
  ::onnx::ModelProto model;
  SPORE_CHECK_KIND(
      ErrorKind::IOError, model.ParseFromString(bytes), where,
      "not a valid ONNX model (the protobuf ModelProto does not parse); the file is corrupt or "
      "not an .onnx file");
  SPORE_CHECK_KIND(ErrorKind::IOError, model.has_graph(), where,
                   "field graph is missing; expected an ONNX model with a graph (the file is "
                   "corrupt or not an .onnx file)");
  OnnxModel m;
  m.impl_ = std::make_shared<Impl>();
  Impl& im = *m.impl_;
  im.path = path;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") im.opset = o.version();
  // No default-domain opset (IR version 1 models, or only other domains' ops, which are then
  // reported as unsupported): read the default ops as opset 1.
  if (im.opset == 0) im.opset = 1;
  // An opset newer than any ONNX release may change what an op means: refused, never guessed.
  SPORE_CHECK_KIND(
      ErrorKind::NotImplemented, im.opset <= kNewestOnnxOpset, where,
      "field opset_import: the model "
      "declares opset ",
      im.opset, " of the default ONNX domain; the newest ONNX defines is ", kNewestOnnxOpset,
      " (ONNX 1.18), which this importer reads. Export the model with opset <= ", kNewestOnnxOpset,
      " (torch.onnx.export(..., opset_version=17), the version Spore writes)");
  im.graph = std::move(*model.mutable_graph());
  const auto& g = im.graph;

  std::set<std::string> defined;
  for (const auto& t : g.initializer()) {
    const std::string w = where + "initializer \"" + t.name() + "\": ";
    SPORE_CHECK_KIND(ErrorKind::IOError, !t.name().empty(), where, "an initializer has no name");
    im.initializers[t.name()] = onnx_detail::from_tensor_proto(t, w);
    defined.insert(t.name());
  }
  SPORE_CHECK_KIND(ErrorKind::NotImplemented, g.sparse_initializer_size() == 0, where,
                   "field sparse_initializer: sparse initializers are not supported");
  for (const auto& v : g.input()) {
    if (im.initializers.count(v.name())) continue;  // an input with a default: the initializer
    im.inputs.push_back(value_info(v, where, "graph input"));
    defined.insert(v.name());
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string w =
        where + "node #" + std::to_string(i) + " (" + n.op_type() + " \"" + n.name() + "\"): ";
    for (const auto& in : n.input())
      SPORE_CHECK_KIND(
          ErrorKind::IOError, in.empty() || defined.count(in), w, "field input: \"", in,
          "\" is not a graph input, an initializer or the output of an earlier node (the "
          "graph is not topologically sorted, or the name is wrong)");
    for (const auto& out : n.output())
      if (!out.empty()) defined.insert(out);
  }
  for (const auto& v : g.output()) {
    SPORE_CHECK_KIND(ErrorKind::IOError, defined.count(v.name()), where, "graph output \"",
                     v.name(), "\" is produced by no node");
    im.outputs.push_back(value_info(v, where, "graph output"));
  }
  // A graph without outputs computes nothing a caller could read (running it crashed).
  SPORE_CHECK_KIND(ErrorKind::IOError, !im.outputs.empty(), where,
                   "field graph.output: the graph declares no outputs; expected at least one "
                   "(a model exported without outputs, or not an ONNX model)");
  return m;
}

const std::vector<OnnxValueInfo>& OnnxModel::inputs() const { return impl_->inputs; }
const std::vector<OnnxValueInfo>& OnnxModel::outputs() const { return impl_->outputs; }

std::vector<std::string> OnnxModel::supported_ops() {
  std::vector<std::string> out;
  for (const auto& [name, h] : onnx_detail::handlers()) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> OnnxModel::op_types() const {
  std::vector<std::string> out;
  for (const auto& n : impl_->graph.node())
    if (std::find(out.begin(), out.end(), n.op_type()) == out.end()) out.push_back(n.op_type());
  return out;
}

Tensor load_onnx_tensor(const std::string& path) {
  const std::string bytes = onnx_detail::read_file(path, "onnx");
  ::onnx::TensorProto p;
  SPORE_CHECK_KIND(ErrorKind::IOError, bytes.size() < (size_t(1) << 31) && p.ParseFromString(bytes),
                   "[onnx] ", path, ": not a serialized TensorProto (the protobuf does not parse)");
  return onnx_detail::from_tensor_proto(p, "[onnx] " + path + ": ");
}

std::vector<std::string> OnnxModel::unsupported_ops() const {
  std::set<std::string> out;
  for (const auto& n : impl_->graph.node()) {
    if (!onnx_detail::handlers().count(onnx_detail::op_key(n))) out.insert(onnx_detail::op_key(n));
  }
  return {out.begin(), out.end()};
}

namespace onnx_detail {

void run_nodes(const ::onnx::GraphProto& g, std::map<std::string, Tensor>& env,
               const std::string& where, int64_t opset) {
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string w = where + "node #" + std::to_string(i) + " (" + n.op_type() +
                          (n.name().empty() ? "" : " \"" + n.name() + "\"") + "): ";
    auto it = onnx_detail::handlers().find(onnx_detail::op_key(n));
    SPORE_CHECK_KIND(ErrorKind::NotImplemented, it != onnx_detail::handlers().end(), w,
                     "unsupported ONNX op ", onnx_detail::op_key(n), " (opset ", opset,
                     "); Spore's importer maps ", onnx_detail::handlers().size(),
                     " ops (OnnxModel::supported_ops())");
    Ctx c{n, {}, opset, w, {}};
    c.subgraph = [&env, &w, opset](const ::onnx::GraphProto& sub, const std::vector<Tensor>& ins) {
      std::map<std::string, Tensor> scope = env;  // the enclosing graph's values
      const std::string sw = w + "subgraph \"" + sub.name() + "\": ";
      for (const auto& t : sub.initializer()) scope[t.name()] = from_tensor_proto(t, sw);
      SPORE_CHECK_KIND(ErrorKind::IOError, size_t(sub.input_size()) == ins.size(), sw, "takes ",
                       sub.input_size(), " inputs, given ", ins.size());
      for (size_t k = 0; k < ins.size(); ++k) scope[sub.input(int(k)).name()] = ins[k];
      run_nodes(sub, scope, sw, opset);
      std::vector<Tensor> out;
      for (const auto& o : sub.output()) {
        SPORE_CHECK_KIND(ErrorKind::IOError, scope.count(o.name()), sw, "output \"", o.name(),
                         "\" is produced by no node");
        out.push_back(scope.at(o.name()));
      }
      return out;
    };
    // A node with a subgraph is never computed as a constant as a whole: its body may read traced
    // values of the enclosing graph; its own nodes are each folded when they can be.
    bool has_subgraph = false;
    for (const auto& a : n.attribute())
      has_subgraph = has_subgraph || a.type() == ::onnx::AttributeProto::GRAPH;
    bool all_const = true;
    for (const auto& in : n.input()) {
      if (in.empty()) {
        c.in.emplace_back();
        continue;
      }
      SPORE_CHECK_KIND(ErrorKind::IOError, env.count(in), w, "input \"", in,
                       "\" is not defined before the node");
      c.in.push_back(env.at(in));
      all_const = all_const && !c.in.back().is_symbolic();
    }
    std::vector<Tensor> outs;
    if (all_const && !has_subgraph && is_tracing()) {
      NoTrace guard;  // constants only: compute now, the graph sees the result
      outs = it->second(c);
    } else {
      outs = it->second(c);
    }
    for (int k = 0; k < n.output_size() && k < int(outs.size()); ++k)
      if (!n.output(k).empty()) {
        SPORE_CHECK_KIND(ErrorKind::NotImplemented, outs[size_t(k)].defined(), w, "output ", k,
                         " (\"", n.output(k), "\") is not produced by Spore's mapping of ",
                         n.op_type());
        env[n.output(k)] = outs[size_t(k)];
      }
    for (int k = int(outs.size()); k < n.output_size(); ++k)
      SPORE_CHECK_KIND(ErrorKind::NotImplemented, n.output(k).empty(), w, "output ", k, " (\"",
                       n.output(k), "\") of ", n.op_type(), " is not produced by Spore's mapping");
  }
}

}  // namespace onnx_detail

const std::map<std::string, Tensor>& OnnxModel::Impl::weights_on(Device d) {
  if (d.type == DeviceType::CPU) return initializers;
  auto& w = device_weights[to_string(d)];
  if (w.empty() && !initializers.empty()) {
    NoTrace guard;
    for (const auto& [name, t] : initializers) w[name] = t.to(d);
  }
  return w;
}

std::vector<Tensor> OnnxModel::Impl::interpret(const std::vector<Tensor>& args) {
  const std::string where = "[onnx] " + path + ": ";
  std::map<std::string, Tensor> env;
  if (is_tracing()) {
    // Fresh copies only the graph will hold: the tracer then treats the weights as constants, so
    // the passes fold them (BatchNorm into the conv weights, transposes, ...) once, at compile
    // time. On a device the copy is the upload.
    NoTrace guard;
    for (const auto& [name, t] : initializers) {
      Tensor c;
      if (device.type == DeviceType::CPU) {
        c = Tensor::empty(t.shape(), t.dtype());
        if (t.nbytes()) std::memcpy(c.data_ptr(), t.data_ptr(), t.nbytes());
      } else {
        c = t.to(device);
      }
      env[name] = c;
    }
  } else {
    env = weights_on(device);
  }
  for (size_t i = 0, a = 0; i < inputs.size(); ++i)
    env[inputs[i].name] = i < host.size() && host[i].defined() ? host[i] : args.at(a++);
  onnx_detail::run_nodes(graph, env, where, opset);
  std::vector<Tensor> result;
  for (const auto& o : outputs) result.push_back(env.at(o.name));
  return result;
}

std::vector<Tensor> OnnxModel::run(const std::vector<Tensor>& args, bool graph_mode) {
  Impl& im = *impl_;
  const std::string where = "[onnx] " + im.path + ": ";
  SPORE_CHECK(args.size() == im.inputs.size(), where, "the model takes ", im.inputs.size(),
              " input(s), got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& info = im.inputs[i];
    SPORE_CHECK(args[i].defined(), where, "input \"", info.name, "\" is undefined");
    SPORE_CHECK_TYPE(args[i].dtype() == info.dtype, where, "input \"", info.name, "\" must be ",
                     dtype_name(info.dtype), ", got ", dtype_name(args[i].dtype()));
    bool fits = info.shape.empty() || info.shape.size() == size_t(args[i].dim());
    for (size_t d = 0; fits && d < info.shape.size(); ++d)
      fits = info.shape[d] < 0 || info.shape[d] == args[i].shape()[d];
    SPORE_CHECK(fits, where, "input \"", info.name, "\" must have shape (", info.dim_names,
                "), got ", shape_str(args[i].shape()));
  }
  const auto bad = unsupported_ops();
  if (!bad.empty()) {
    std::string list;
    for (const auto& b : bad) list += (list.empty() ? "" : ", ") + b;
    SPORE_THROW(ErrorKind::NotImplemented, where, "unsupported ONNX op ", list,
                " (Spore's importer maps ", onnx_detail::handlers().size(),
                " ops: OnnxModel::supported_ops())");
  }
  // Where it runs: the inputs' device (the host's small integer inputs aside, which Graph mode
  // bakes in as numbers).
  im.device = Device{};
  for (size_t i = 0; i < args.size(); ++i) {
    const Device d = args[i].device();
    if (d.type == DeviceType::CPU) continue;
    SPORE_CHECK(im.device.type == DeviceType::CPU || im.device == d, where, "input \"",
                im.inputs[i].name, "\" is on ", to_string(d), " but an earlier input is on ",
                to_string(im.device), "; move the inputs to one device (Tensor::to)");
    im.device = d;
  }
  DeviceGuard on_device(im.device);  // the constants and shapes the handlers make go there
  im.host.clear();
  for (const auto& n : im.graph.node())
    if (onnx_detail::needs_host_values(n.op_type())) graph_mode = false;
  if (!graph_mode) {
    if (im.device.type == DeviceType::CPU) return im.interpret(args);
    std::vector<Tensor> moved;  // op by op, every input joins the device's ops
    for (const Tensor& t : args) moved.push_back(t.to(im.device));
    return im.interpret(moved);
  }
  // The graph inputs that feed a parameter slot (Resize's scales, ...).
  std::set<std::string> params;
  for (const auto& n : im.graph.node())
    for (int k = 0; k < n.input_size(); ++k)
      if (onnx_detail::is_parameter_input(n.op_type(), k)) params.insert(n.input(k));
  std::vector<Tensor> traced;
  im.host_key = to_string(im.device) + "|";  // a graph per device, even of host inputs only
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& t = args[i];
    const bool host = t.numel() <= 1024 && (t.dtype() == kInt64 || t.dtype() == kInt32 ||
                                            t.dtype() == kBool || params.count(im.inputs[i].name));
    im.host.push_back(host ? t.to(im.device).contiguous() : Tensor());
    if (!host) {
      traced.push_back(t.to(im.device));
      continue;
    }
    im.host_key += shape_str(t.shape()) + ":";
    char buf[32];
    for (double v : t.to(kFloat64).to_vector<double>()) {
      std::snprintf(buf, sizeof buf, "%.17g,", v);  // exact: the key tells every value apart
      im.host_key += buf;
    }
    im.host_key += ";";
  }
  if (!im.jit) {
    Impl* self = &im;  // the jit function is owned by the Impl it calls
    JitOptions opts;
    opts.name = "onnx";
    opts.extra_key = [self] { return self->host_key; };
    im.jit = std::make_unique<JitFunction>(
        jit([self](const std::vector<Tensor>& a) { return self->interpret(a); }, opts));
  }
  return (*im.jit)(traced);
}

}  // namespace spore
