// The executor (graph/executor.h).
#include "graph/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "backends/backend.h"
#include "core/log.h"
#include "spore/autograd.h"
#include "spore/profiler.h"

namespace spore::graph {
namespace {

// A copy of a graph's name that lives as long as the process: a profiler span keeps its name
// pointer until the profile is written, and the graph may be gone by then (found by make
// test-asan: Profiler::analyse read a freed graph name after training).
const char* span_name(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string>& names = *new std::unordered_set<std::string>;
  const std::lock_guard lock(mutex);
  return names.insert(name).first->c_str();
}
Tensor slot_tensor(const std::shared_ptr<Storage>& arena, size_t byte_offset, const Value* v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = arena;
  impl->offset = int64_t(byte_offset / itemsize(v->dtype));
  impl->shape = v->shape;
  impl->strides = contiguous_strides(v->shape);
  impl->dtype = v->dtype;
  impl->device = v->device;
  return Tensor(std::move(impl));
}
}  // namespace

namespace {
int& capture_setting() {  // -1: from SPORE_GRAPH_CAPTURE; 0 / 1: set_capture
  static int s = -1;
  return s;
}

std::atomic<int64_t> g_replays{0};
}  // namespace

void set_capture(bool on) { capture_setting() = on ? 1 : 0; }
int64_t capture_replays() { return g_replays; }
bool capture_enabled() {
  if (capture_setting() >= 0) return capture_setting() == 1;
  const char* e = std::getenv("SPORE_GRAPH_CAPTURE");
  return e && std::string(e) == "1";
}

Executor::Executor(std::shared_ptr<Graph> graph) : Executor(graph, plan_memory(*graph)) {}

Executor::Executor(std::shared_ptr<Graph> graph, MemoryPlan plan)
    : graph_(std::move(graph)), plan_(std::move(plan)) {
  const char* prof = std::getenv("SPORE_PROFILE");
  profile_ = prof && *prof && std::string(prof) != "0";
  profile_nodes_ = profile_ && std::string(prof) == "nodes";
  // Each device's arena comes from that device's allocator (Storage asks its backend).
  for (const auto& [device, bytes] : plan_.arenas)
    arenas_.push_back(std::make_shared<Storage>(std::max<size_t>(bytes, 1), device));
  bind();
}

std::shared_ptr<Storage> Executor::arena_for(Device d) const {
  for (size_t i = 0; i < arenas_.size(); ++i)
    if (plan_.arenas[i].first == d) return arenas_[i];
  SPORE_ASSERT(false, "graph executor: no arena planned for ", to_string(d));
}

// Copies between two tensors of one device with that device's Copy kernel.
void Executor::copy(const Tensor& src, const Tensor& dst) const {
  static const ops::Attrs kNoAttrs;
  const ops::KernelEntry* k = ops::find_kernel(ops::OpId::Copy, src.device().type);
  SPORE_CHECK_KIND(ErrorKind::NotImplemented, k, "[copy] has no kernel for device ",
                   device_type_name(src.device().type), " (Graph mode)");
  ops::Tensors in{src}, out{dst};
  const DeviceGuard here(src.device());
  ops::KernelContext ctx{ops::op_def(ops::OpId::Copy), in, out, kNoAttrs,
                         &current_stream(src.device())};
  k->fn(ctx);
}

void Executor::bind() {
  std::unordered_map<const Value*, Tensor> rt;
  args_.clear();
  captured_storage_.clear();
  for (const Value* v : graph_->inputs) {
    if (v->kind == ValueKind::kPlaceholder) {
      rt[v] = slot_tensor(arena_for(v->device), plan_.offset.at(v), v);
      args_.push_back({v, rt[v]});
    } else {
      SPORE_CHECK(v->tensor.shape() == v->shape && v->tensor.dtype() == v->dtype &&
                      v->tensor.strides() == v->strides,
                  "[jit] a tensor captured by graph ", graph_->name, " changed from ",
                  dtype_name(v->dtype), shape_str(v->shape), " to ", dtype_name(v->tensor.dtype()),
                  shape_str(v->tensor.shape()),
                  " (or its layout) after compilation; build a new "
                  "jit function (or TrainOneStepCell) after changing parameters' dtype or shape");
      rt[v] = v->tensor;
      captured_storage_.push_back({v, v->tensor.impl().storage.get()});
    }
  }
  steps_.clear();
  for (const auto& n : graph_->nodes) {
    Step s{&n->def(), nullptr, n->device, &n->attrs, {}, {}, {}, {}};
    for (const Value* in : n->inputs) s.inputs.push_back(rt.at(in));
    if (n->is_view()) {
      const Value* o = n->outputs[0];
      rt[o] = n->def().rules.view(s.inputs[0], n->attrs, {o->shape, o->dtype});
      continue;  // no kernel: the alias is the result
    }
    const ops::KernelEntry* k = ops::find_kernel(n->op, n->device.type);
    SPORE_CHECK_KIND(ErrorKind::NotImplemented, k, "[", n->def().name,
                     "] has no kernel for device ", device_type_name(n->device.type),
                     " (Graph mode)");
    s.fn = k->fn;
    for (const Value* o : n->outputs) {
      rt[o] = slot_tensor(arena_for(o->device), plan_.offset.at(o), o);
      s.outputs.push_back(rt[o]);
    }
    s.slots = s.outputs;
    ops::Metas in, out;
    for (const Value* v : n->inputs) in.push_back({v->shape, v->dtype});
    for (const Value* v : n->outputs) out.push_back({v->shape, v->dtype});
    s.prof_args = "\"node\": " + std::to_string(n->id) + ", " + ops::profile_args(in, out);
    steps_.push_back(std::move(s));
  }
  outputs_.clear();
  for (const Value* o : graph_->outputs) outputs_.push_back(rt.at(o));
  decide_capture();
}

// A graph is captured when capture is on, every kernel runs on one device whose backend captures,
// and no kernel keeps host state across calls: a random op draws its seed from the host generator
// at each call, so a replay would repeat the first mask.
void Executor::decide_capture() {
  captured_.reset();  // bound to the old tensors
  no_capture_.clear();
  if (!capture_enabled()) {
    no_capture_ = "capture is off (SPORE_GRAPH_CAPTURE=1 turns it on)";
    return;
  }
  if (profile_) {
    no_capture_ = "SPORE_PROFILE times each kernel";
    return;
  }
  if (steps_.empty()) {
    no_capture_ = "the graph has no kernels";
    return;
  }
  const Device d = steps_[0].device;
  for (const Step& s : steps_) {
    if (s.device != d) {
      no_capture_ = "its kernels run on " + to_string(d) + " and " + to_string(s.device);
      return;
    }
    if (s.def->has(ops::kRandom)) {
      no_capture_ =
          std::string("[") + s.def->name + "] draws from the host's generator at each call";
      return;
    }
  }
  if (!get_backend(d.type).supports_capture())
    no_capture_ = "the " + to_string(d) + " backend does not capture";
}

void Executor::run_steps() {
  for (size_t si = 0; si < steps_.size(); ++si) {
    Step& s = steps_[si];
    const profiling::Span span("op", s.def->name,
                               &s.prof_args);  // planned memory: no bytes allocated
    const DeviceGuard here(s.device);
    ops::KernelContext ctx{*s.def, s.inputs, s.outputs, *s.attrs, &current_stream(s.device)};
    if (profile_) {
      const auto t0 = std::chrono::steady_clock::now();
      s.fn(ctx);
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (runs_ == 1 ? first_seconds_[si] : step_seconds_[si]) += dt;
    } else {
      s.fn(ctx);
    }
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      if (s.outputs[i].is_same(s.slots[i])) continue;
      // The kernel replaced its output tensor: the planned slot must still get the data.
      copy(s.outputs[i], s.slots[i]);
      s.outputs[i] = s.slots[i];
    }
  }
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& args) {
  SPORE_CHECK(int(args.size()) == graph_->num_args, "[jit] graph ", graph_->name, " takes ",
              graph_->num_args, " arguments, got ", args.size());
  for (const auto& [v, t] : captured_storage_)
    if (v->tensor.impl().storage.get() != t) {  // e.g. a checkpoint load replaced a parameter
      bind();
      break;
    }
  for (auto& [v, slot] : args_) {
    const Tensor& a = args[size_t(v->arg_index)];
    SPORE_CHECK(a.shape() == v->shape && a.dtype() == v->dtype, "[jit] argument ", v->arg_index,
                " is ", dtype_name(a.dtype()), shape_str(a.shape()),
                " but the graph was compiled for ", dtype_name(v->dtype), shape_str(v->shape));
    SPORE_CHECK(a.device() == v->device, "[jit] argument ", v->arg_index, " is on ",
                to_string(a.device()), " but graph ", graph_->name, " was compiled for ",
                to_string(v->device),
                "; move it with .to(device) (Model and TrainOneStepCell move batches for you)");
    copy(a, slot);
  }
  if (profile_) {
    step_seconds_.resize(steps_.size());
    first_seconds_.resize(steps_.size());
  }
  ++runs_;
  const profiling::Span graph_span("graph",
                                   profiling::enabled() ? span_name(graph_->name) : "graph");
  if (captured_) {
    captured_->replay(current_stream(steps_[0].device));
    ++g_replays;
  } else if (no_capture_.empty() && runs_ >= 2) {
    // The first run made the kernels' one-time choices (algorithms, workspaces); record the steps
    // now. Nothing recorded has run yet, so a failed capture runs the steps plainly instead.
    const Device d = steps_[0].device;
    Backend& backend = get_backend(d.type);
    Stream& stream = current_stream(d);
    backend.begin_capture(stream);
    std::string why;
    try {
      run_steps();
    } catch (const std::exception& e) {
      why = e.what();
    }
    auto work = backend.end_capture(stream, why);
    if (work && why.empty()) {
      captured_ = std::move(work);
      log::debug("graph {}: {} kernels captured on {}", graph_->name, steps_.size(), to_string(d));
      captured_->replay(stream);
      ++g_replays;
    } else {
      no_capture_ = "the capture failed: " + why;
      log::info("graph {}: not captured ({}); running its kernels one by one", graph_->name, why);
      run_steps();
    }
  } else {
    run_steps();
  }
  std::vector<Tensor> result;
  for (const Tensor& o : outputs_) {
    Tensor dst = Tensor::empty(o.shape(), o.dtype(), o.device());
    copy(o, dst);
    result.push_back(dst);
  }
  return result;
}

Executor::~Executor() {
  if (!profile_ || runs_ == 0 || step_seconds_.empty()) return;
  // Runs after the first, when there are any: the first includes one-time work.
  const bool skip_first = runs_ > 1;
  const double runs = double(skip_first ? runs_ - 1 : runs_);
  auto seconds = [&](size_t i) { return skip_first ? step_seconds_[i] : first_seconds_[i]; };
  std::map<std::string, std::pair<double, int>> by_op;  // op -> (seconds, nodes)
  double total = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    auto& e = by_op[steps_[i].def->name];
    e.first += seconds(i);
    e.second += 1;
    total += seconds(i);
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  log::info("profile: graph {}: {} runs, {:.3f} ms per run in kernels{}", graph_->name, runs_,
            1e3 * total / runs, skip_first ? " (after the first run)" : "");
  for (const auto& [name, e] : rows)
    log::info("profile:   {:<28} {:3} nodes {:8.3f} ms/run {:5.1f}%", name, e.second,
              1e3 * e.first / runs, 100 * e.first / std::max(total, 1e-12));
  if (!profile_nodes_) return;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto& out = steps_[i].outputs;
    log::info("profile:   node {:4} {:<24} {:<22} {:8.3f} ms/run", i, steps_[i].def->name,
              out.empty() ? std::string("-") : shape_str(out[0].shape()), 1e3 * seconds(i) / runs);
  }
}

}  // namespace spore::graph
