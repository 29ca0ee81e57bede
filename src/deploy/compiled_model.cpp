// Compiled models (spore/deploy.h): compile = trace (the ONNX importer's interpreter or a Cell's
// forward pass) + freeze the weights into constants + every Graph-mode pass, once per batch size;
// the result is written by graph/model_file.cpp. Loading parses the file and builds an executor
// per graph; nothing is traced or rewritten at load.
#include "spore/deploy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/backend.h"
#include "graph/executor.h"
#include "graph/memory_plan.h"
#include "graph/model_file.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "spore/grad_mode.h"
#include "spore/onnx.h"
#include "spore/ops.h"
#include "spore/version.h"

namespace spore {

struct CompiledModel::Impl {
  graph::ModelFile file;
  Device device;  // where the graphs run: file.device's device 0
  std::vector<ModelTensorInfo> inputs, outputs;
  std::string name;  // the file, for messages
  mutable std::mutex mutex;
  // run()'s executors (a session's state without the session, which would hold this Impl and
  // so never let it go).
  mutable std::unique_ptr<InferenceSession::State> state;
};

struct InferenceSession::State {
  std::vector<std::unique_ptr<graph::Executor>> execs;  // per variant, made when first used
};

namespace {
std::vector<Tensor> run_model(const CompiledModel::Impl& model, InferenceSession::State& state,
                              const std::vector<Tensor>& args);
}  // namespace

namespace {

using graph::ModelFile;
using graph::ModelIO;
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<ModelTensorInfo> infos(const std::vector<ModelIO>& ios) {
  std::vector<ModelTensorInfo> out;
  for (const auto& io : ios) out.push_back({io.name, io.shape, io.dtype});
  return out;
}

// Traces fn at each batch, freezes what it captured (parameters, statistics) into constants so the
// passes fold and pack them, and runs the pipeline.
ModelFile compile(const Fn& fn, std::vector<ModelIO> inputs, std::vector<std::string> out_names,
                  const CompileOptions& opts, bool dynamic) {
  ModelFile f;
  f.source = opts.source;
  std::vector<int64_t> batches = opts.batches;
  if (batches.empty()) batches = {dynamic ? 1 : inputs.at(0).shape.at(0)};
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  for (int64_t b : batches) SPORE_CHECK(b >= 1, "[compile] batch size ", b, " must be at least 1");
  if (!dynamic)
    for (const auto& in : inputs)
      SPORE_CHECK(batches.size() == 1 && !in.shape.empty() && in.shape[0] == batches[0],
                  "[compile] input \"", in.name, "\" has a fixed batch of ",
                  in.shape.empty() ? 0 : in.shape[0],
                  "; --batch must be that number (the model's batch is not dynamic)");
  NoGradGuard no_grad;
  // The target: the trace runs there (its weights, the device backend's passes).
  const Device target = opts.device;
  SPORE_CHECK(
      target.type == DeviceType::CPU || (has_backend(target.type) && target.index >= 0 &&
                                         target.index < get_backend(target.type).device_count()),
      "[compile] device ", to_string(target),
      " is not available in this process; compile for a device it has (device_count)");
  f.device = device_type_name(target.type);
  f.target = target;
  const DeviceGuard on_target(target);
  for (int64_t b : batches) {
    std::vector<Tensor> examples;
    for (const auto& in : inputs) {
      Shape s = in.shape;
      SPORE_CHECK(!s.empty(), "[compile] input \"", in.name,
                  "\" is a scalar; compiled models take batched inputs (dim 0 is the batch)");
      if (dynamic) s[0] = b;
      examples.push_back(Tensor::empty(s, in.dtype, target));
    }
    auto g = graph::trace(fn, examples, "model_b" + std::to_string(b));
    for (graph::Value* v : g->inputs)
      if (v->kind == graph::ValueKind::kCapture) {
        // A private copy: the file's weights are what the network holds now, and the passes may
        // fold them (BatchNorm into the conv) and pack them for the kernels.
        v->tensor = v->tensor.contiguous().clone();
        v->strides = v->tensor.strides();
        v->offset = v->tensor.offset();
        v->kind = graph::ValueKind::kConstant;
      }
    graph::run_pipeline(*g);
    {
      // One run on zeros (a private executor): the kernels make their timed choices now, and the
      // file carries them (ModelFile::kernel_choices), so a deployed first run does not time.
      std::vector<Tensor> zeros_in;
      for (const Tensor& e : examples) zeros_in.push_back(zeros(e.shape(), e.dtype()).to(target));
      graph::Executor(std::shared_ptr<graph::Graph>(g.get(), [](graph::Graph*) {})).run(zeros_in);
    }
    if (f.outputs.empty()) {
      for (size_t i = 0; i < g->outputs.size(); ++i) {
        const graph::Value* o = g->outputs[i];
        ModelIO io{i < out_names.size()     ? out_names[i]
                   : g->outputs.size() == 1 ? std::string("output")
                                            : "output_" + std::to_string(i),
                   o->shape, o->dtype};
        if (dynamic) {
          SPORE_CHECK(!o->shape.empty() && o->shape[0] == b, "[compile] output \"", io.name,
                      "\" has shape ", shape_str(o->shape), " at batch ", b,
                      ": its dim 0 is not the batch, so the batch cannot be dynamic; compile "
                      "with one fixed batch (an input without a dynamic dim 0)");
          io.shape[0] = -1;
        }
        f.outputs.push_back(io);
      }
    } else {
      for (size_t i = 0; i < g->outputs.size(); ++i)
        SPORE_CHECK(g->outputs[i]->shape[0] == b, "[compile] output \"", f.outputs[i].name,
                    "\" has dim 0 ", g->outputs[i]->shape[0], " at batch ", b, ", not the batch");
    }
    f.variants.push_back({b, std::shared_ptr<graph::Graph>(std::move(g)), nullptr});
  }
  if (dynamic)
    for (auto& in : inputs) in.shape[0] = -1;
  f.inputs = std::move(inputs);
  f.kernel_choices = get_backend(DeviceType::CPU).kernel_choices();
  // A model whose graphs hold no layout chosen for this vector width runs on any CPU.
  bool isa = false;
  for (const auto& v : f.variants)
    for (const auto& n : v.graph->nodes) isa |= get_backend(DeviceType::CPU).isa_dependent(n->op);
  f.requirements = isa ? graph::host_requirements() : graph::kAnyTarget;
  return f;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SPORE_CHECK_KIND(ErrorKind::IOError, in, "[model] cannot open ", path, ": ",
                   std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string dims_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + (s[i] < 0 ? std::string("N") : std::to_string(s[i]));
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

// ---- construction
// --------------------------------------------------------------------------------

namespace {
// A loaded file's kernel choices join the process's (a malformed list is the file's error).
ModelFile with_choices(ModelFile f, const std::string& name) {
  try {
    get_backend(DeviceType::CPU).load_kernel_choices(f.kernel_choices);
  } catch (const Error& e) {
    SPORE_THROW(ErrorKind::IOError, "[model] ", name, ": field kernel_choices: ", e.what());
  }
  return f;
}

CompiledModel wrap(ModelFile f, std::string name) {
  auto impl = std::make_shared<CompiledModel::Impl>();
  impl->inputs = infos(f.inputs);
  impl->outputs = infos(f.outputs);
  impl->device = f.target;
  impl->file = std::move(f);
  impl->name = std::move(name);
  return CompiledModel(std::move(impl));
}
}  // namespace

CompiledModel CompiledModel::from_onnx(const std::string& onnx_path, CompileOptions opts) {
  OnnxModel om = OnnxModel::load(onnx_path);
  const auto bad = om.unsupported_ops();
  if (!bad.empty()) {
    std::string list;
    for (const auto& b : bad) list += (list.empty() ? "" : ", ") + b;
    SPORE_THROW(ErrorKind::NotImplemented, "[compile] ", onnx_path,
                " uses ONNX ops Spore does not support: ", list);
  }
  std::vector<ModelIO> ins;
  bool dynamic = false;
  for (const auto& in : om.inputs()) {
    SPORE_CHECK(!in.shape.empty(), "[compile] ", onnx_path, ": input \"", in.name,
                "\" has no static shape (", in.dim_names,
                "); compiled models need every dimension but the batch known");
    for (size_t d = 1; d < in.shape.size(); ++d)
      SPORE_CHECK(in.shape[d] >= 0, "[compile] ", onnx_path, ": input \"", in.name,
                  "\" has a symbolic dimension ", d, " (", in.dim_names,
                  "); only dim 0 (the batch) may be dynamic in a compiled model");
    dynamic = dynamic || in.shape[0] < 0;
    ins.push_back({in.name, in.shape, in.dtype});
  }
  if (dynamic)
    for (const auto& in : ins)
      SPORE_CHECK(in.shape[0] < 0, "[compile] ", onnx_path, ": input \"", in.name,
                  "\" has a fixed batch while another's is dynamic; make all or none dynamic");
  std::vector<std::string> out_names;
  for (const auto& o : om.outputs()) out_names.push_back(o.name);
  if (opts.source.empty()) opts.source = "onnx:" + onnx_path;
  // The importer's interpreter, traced once per batch (graph_mode=false: op by op, so the tracer
  // here sees every op; the initializers become constants).
  Fn fn = [om](const std::vector<Tensor>& a) mutable { return om.run(a, false); };
  return wrap(compile(fn, std::move(ins), std::move(out_names), opts, dynamic), onnx_path);
}

CompiledModel CompiledModel::from_cell(nn::Cell& net, const std::vector<Tensor>& examples,
                                       CompileOptions opts, bool dynamic_batch,
                                       std::vector<std::string> input_names,
                                       std::vector<std::string> output_names) {
  if (input_names.empty() && examples.size() == 1) input_names = {"input"};
  if (output_names.empty()) output_names = {"output"};
  net.set_train(false);
  Fn fn = [&net](const std::vector<Tensor>& a) -> std::vector<Tensor> {
    if (a.size() == 1) return {net(a[0])};
    if (a.size() == 2) return {net(a[0], a[1])};
    return net.forward(a);
  };
  if (opts.source.empty()) opts.source = "cell";
  return from_function(fn, examples, std::move(opts), dynamic_batch, std::move(input_names),
                       std::move(output_names));
}

CompiledModel CompiledModel::from_function(const Fn& fn, const std::vector<Tensor>& examples,
                                           CompileOptions opts, bool dynamic_batch,
                                           std::vector<std::string> input_names,
                                           std::vector<std::string> output_names) {
  SPORE_CHECK(!examples.empty(), "[compile] from_function needs at least one example input");
  std::vector<ModelIO> ins;
  for (size_t i = 0; i < examples.size(); ++i) {
    SPORE_CHECK(examples[i].defined() && examples[i].dim() >= 1, "[compile] example input ", i,
                " must be a tensor with a batch dimension");
    ins.push_back({i < input_names.size() ? input_names[i] : "input_" + std::to_string(i),
                   examples[i].shape(), examples[i].dtype()});
  }
  if (opts.source.empty()) opts.source = "function";
  if (opts.batches.empty() && dynamic_batch) opts.batches = {examples[0].shape()[0]};
  return wrap(compile(fn, std::move(ins), std::move(output_names), opts, dynamic_batch),
              "<compiled>");
}

CompiledModel CompiledModel::load(const std::string& path) {
  // The file is mapped, not read: the weights are used where the page cache has them, read-only
  // (the reader admits no node that writes a constant), with no copy at load. MAP_POPULATE maps
  // every page at once instead of faulting them in one by one (45 -> 20 ms for ResNet-18).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SPORE_CHECK_KIND(ErrorKind::IOError, fd >= 0, "[model] cannot open ", path, ": ",
                   std::strerror(errno));
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const int stat_errno = errno;
  if (!stat_ok || !S_ISREG(st.st_mode) || st.st_size == 0) {
    ::close(fd);
    SPORE_CHECK_KIND(ErrorKind::IOError, stat_ok, "[model] cannot stat ", path, ": ",
                     std::strerror(stat_errno));
    SPORE_CHECK_KIND(ErrorKind::IOError, S_ISREG(st.st_mode), "[model] ", path,
                     " is not a regular file");
    // An empty file: the parser names the field (the magic number) it lacks.
    return wrap(graph::read_model_file("", 0, path), path);
  }
  const size_t size = size_t(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {  // e.g. a file system without mmap: read it instead
    const std::string bytes = read_all(path);
    return wrap(with_choices(graph::read_model_file(bytes.data(), bytes.size(), path), path), path);
  }
  std::shared_ptr<const void> mapping(
      p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
  return wrap(with_choices(graph::read_model_file(p, size, path, mapping), path), path);
}

CompiledModel CompiledModel::from_buffer(const void* data, size_t size, const std::string& name) {
  SPORE_CHECK(data != nullptr || size == 0, "[model] ", name, ": the buffer is null");
  return wrap(with_choices(graph::read_model_file(data, size, name), name), name);
}

bool CompiledModel::is_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof graph::kModelMagic] = {};
  in.read(magic, sizeof magic);
  return in && graph::is_model_file(magic, sizeof magic);
}

void CompiledModel::save(const std::string& path) const {
  const std::string bytes = to_bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  SPORE_CHECK_KIND(ErrorKind::IOError, out, "[model] cannot write ", path, ": ",
                   std::strerror(errno));
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  SPORE_CHECK_KIND(ErrorKind::IOError, out, "[model] writing ", path,
                   " failed: ", std::strerror(errno));
}

std::string CompiledModel::to_bytes() const {
  SPORE_CHECK(impl_, "[model] the CompiledModel is empty");
  return graph::write_model_file(impl_->file);
}

const std::vector<ModelTensorInfo>& CompiledModel::inputs() const { return impl_->inputs; }
const std::vector<ModelTensorInfo>& CompiledModel::outputs() const { return impl_->outputs; }
std::vector<int64_t> CompiledModel::batches() const {
  std::vector<int64_t> b;
  for (const auto& v : impl_->file.variants) b.push_back(v.batch);
  return b;
}
std::string CompiledModel::producer() const { return impl_->file.producer; }
std::string CompiledModel::source() const { return impl_->file.source; }
std::string CompiledModel::device() const { return impl_->file.device; }

std::string CompiledModel::summary() const {
  const ModelFile& f = impl_->file;
  std::ostringstream s;
  s << "format:     Spore compiled model, version " << f.format_version << "\n";
  s << "producer:   " << (f.producer.empty() ? std::string("spore ") + SPORE_VERSION : f.producer)
    << "\n";
  s << "source:     " << f.source << "\n";
  s << "target:     " << f.device << " (" << f.requirements << ")\n";
  for (const auto& in : f.inputs)
    s << "input:      " << in.name << " " << dtype_name(in.dtype) << " " << dims_str(in.shape)
      << "\n";
  for (const auto& o : f.outputs)
    s << "output:     " << o.name << " " << dtype_name(o.dtype) << " " << dims_str(o.shape) << "\n";
  size_t wb = 0;
  for (const auto& v : f.variants)
    for (const graph::Value* in : v.graph->inputs)
      if (in->kind != graph::ValueKind::kPlaceholder) wb += in->nbytes();
  s << "weights:    " << (f.weight_bytes ? f.weight_bytes : wb) << " bytes";
  if (f.num_weights) s << " in " << f.num_weights << " tensors";
  s << "\n";
  for (const auto& v : f.variants) {
    std::map<std::string, int> ops;
    for (const auto& n : v.graph->nodes) ++ops[n->def().name];
    const graph::MemoryPlan plan = v.plan ? *v.plan : graph::plan_memory(*v.graph);
    s << "graph:      batch " << v.batch << ", " << v.graph->nodes.size() << " nodes, arena "
      << plan.arena_bytes << " bytes (" << (v.plan ? "stored" : "planned at load") << ", "
      << plan.total_bytes << " without reuse):";
    for (const auto& [name, k] : ops) s << " " << name << "x" << k;
    s << "\n";
  }
  return s.str();
}

std::vector<Tensor> CompiledModel::run(const std::vector<Tensor>& inputs) const {
  SPORE_CHECK(impl_, "[model] the CompiledModel is empty");
  const std::lock_guard lock(impl_->mutex);
  if (!impl_->state) {
    impl_->state = std::make_unique<InferenceSession::State>();
    impl_->state->execs.resize(impl_->file.variants.size());
  }
  return run_model(*impl_, *impl_->state, inputs);
}

// ---- running
// -------------------------------------------------------------------------------------

InferenceSession::InferenceSession(const CompiledModel& model)
    : model_(model.impl()), state_(std::make_unique<State>()) {
  SPORE_CHECK(model_, "[model] InferenceSession of an empty CompiledModel");
  state_->execs.resize(model_->file.variants.size());
}
InferenceSession::~InferenceSession() = default;

std::vector<Tensor> InferenceSession::run(const std::vector<Tensor>& args) {
  return run_model(*model_, *state_, args);
}

namespace {
std::vector<Tensor> run_model(const CompiledModel::Impl& model, InferenceSession::State& state,
                              const std::vector<Tensor>& args) {
  const ModelFile& f = model.file;
  const std::string where = "[model] " + model.name + ": ";
  SPORE_CHECK(args.size() == f.inputs.size(), where, "the model takes ", f.inputs.size(),
              " input(s), got ", args.size());
  int64_t batch = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const ModelIO& io = f.inputs[i];
    const Tensor& a = args[i];
    SPORE_CHECK(a.defined(), where, "input \"", io.name, "\" is undefined");
    SPORE_CHECK_TYPE(a.dtype() == io.dtype, where, "input \"", io.name, "\" must be ",
                     dtype_name(io.dtype), ", got ", dtype_name(a.dtype()),
                     "; convert it before the call (the compiled graph's kernels are ",
                     dtype_name(io.dtype), ")");
    bool fits = size_t(a.dim()) == io.shape.size();
    for (size_t d = 0; fits && d < io.shape.size(); ++d)
      fits = io.shape[d] < 0 ? a.shape()[d] >= 1 : a.shape()[d] == io.shape[d];
    SPORE_CHECK(fits, where, "input \"", io.name, "\" must have shape ", dims_str(io.shape),
                ", got ", shape_str(a.shape()));
    SPORE_CHECK(a.device().type == DeviceType::CPU || a.device() == model.device, where, "input \"",
                io.name, "\" is on ", to_string(a.device()), "; this model runs on ",
                to_string(model.device), ": pass host tensors or tensors on ",
                to_string(model.device));
    if (batch < 0) batch = a.shape()[0];
    SPORE_CHECK(a.shape()[0] == batch, where, "input \"", io.name, "\" has batch ", a.shape()[0],
                ", input \"", f.inputs[0].name, "\" has ", batch,
                "; every input must have the same batch");
  }
  auto exec = [&](size_t v) -> graph::Executor& {
    if (!state.execs[v]) {
      const graph::ModelVariant& var = f.variants[v];
      state.execs[v] = var.plan ? std::make_unique<graph::Executor>(var.graph, *var.plan)
                                : std::make_unique<graph::Executor>(var.graph);
    }
    return *state.execs[v];
  };
  // Host inputs of a device model go there first (the executor takes each where its graph has it).
  const DeviceGuard on(model.device);
  std::vector<Tensor> moved;
  for (size_t i = 0; i < args.size(); ++i) {
    const graph::Value* slot = nullptr;
    for (const graph::Value* v : f.variants.front().graph->inputs)
      if (v->kind == graph::ValueKind::kPlaceholder && v->arg_index == int(i)) slot = v;
    moved.push_back(slot && args[i].device() != slot->device ? args[i].to(slot->device) : args[i]);
  }
  const std::vector<Tensor>& in = moved;
  for (size_t v = 0; v < f.variants.size(); ++v)
    if (f.variants[v].batch == batch) return exec(v).run(in);
  // A dynamic batch the file has no graph for: chunks of the compiled batches, largest first.
  std::string have;
  for (const auto& v : f.variants) have += (have.empty() ? "" : ", ") + std::to_string(v.batch);
  const int64_t smallest = f.variants.front().batch;
  SPORE_CHECK(batch % smallest == 0 || smallest == 1, where, "batch ", batch,
              " cannot be made of the compiled batch sizes (", have,
              "); compile with --batch 1 (or this batch) as well");
  std::vector<std::vector<Tensor>> parts(f.outputs.size());
  for (int64_t start = 0; start < batch;) {
    size_t v = f.variants.size();
    while (v-- > 0)
      if (f.variants[v].batch <= batch - start) break;
    SPORE_CHECK(v < f.variants.size(), where, "batch ", batch,
                " cannot be made of the compiled batch sizes (", have, ")");
    const int64_t b = f.variants[v].batch;
    std::vector<Tensor> chunk;
    for (const Tensor& a : in) chunk.push_back(a.slice(0, start, start + b));
    std::vector<Tensor> y = exec(v).run(chunk);
    for (size_t k = 0; k < y.size(); ++k) parts[k].push_back(y[k]);
    start += b;
  }
  std::vector<Tensor> out;
  for (auto& p : parts) out.push_back(p.size() == 1 ? p[0] : concat(p, 0));
  return out;
}
}  // namespace

}  // namespace spore
