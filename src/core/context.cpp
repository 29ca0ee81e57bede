// The process-wide context (mode, device). Graph mode itself lives in src/graph (issue #4); until
// it exists, asking for it says so instead of silently running eagerly.
#include "spore/context.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "backends/backend.h"
#include "spore/error.h"

namespace spore {
namespace {
Mode g_mode = Mode::PyNative;
bool g_save_graphs = false;
std::string g_save_graphs_path = "./graphs";
Device g_device;
thread_local bool t_has_device = false;
thread_local Device t_device;
bool (*g_graph_available)() = nullptr;
}  // namespace

namespace detail {
// The graph compiler registers itself here when it is linked in.
void set_graph_mode_available(bool (*fn)()) { g_graph_available = fn; }
}  // namespace detail

void set_context(const ContextOptions& opts) {
  if (opts.save_graphs) g_save_graphs = *opts.save_graphs;
  if (opts.save_graphs_path) {
    SPORE_CHECK(!opts.save_graphs_path->empty(),
                "[set_context] save_graphs_path is empty; give a folder");
    g_save_graphs_path = *opts.save_graphs_path;
  }
  if (!opts.mode) return;
  if (opts.mode == Mode::Graph && !(g_graph_available && g_graph_available()))
    SPORE_THROW(
        ErrorKind::NotImplemented,
        "Graph mode is not available in this build yet: the graph compiler (tracing, passes, "
        "memory planning) is still being written. Use Mode::PyNative (`--mode pynative`), "
        "which runs the same ops eagerly.");
  g_mode = *opts.mode;
}
std::string save_graphs_path() {
  if (g_save_graphs) return g_save_graphs_path;
  const char* env = std::getenv("SPORE_DUMP_IR");
  return env && *env ? env : "";
}
Mode get_context_mode() { return g_mode; }

namespace {
// MindSpore's device_target names (any case; CUDA and NPU as aliases) as a device type.
DeviceType target_type(const std::string& target) {
  std::string t = target;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::toupper(c); });
  if (t == "CPU") return DeviceType::CPU;
  if (t == "GPU" || t == "CUDA") return DeviceType::GPU;
  if (t == "ASCEND" || t == "NPU") return DeviceType::Ascend;
  if (t == "TEST" && has_backend(DeviceType::Test)) return DeviceType::Test;  // test builds only
  SPORE_THROW(ErrorKind::ValueError, "Unsupported device target '", target,
              "'. Expected one of 'CPU', 'GPU', 'Ascend'.");
}
}  // namespace

int device_count(const std::string& target) {
  const DeviceType type = target_type(target);
  return has_backend(type) ? get_backend(type).device_count() : 0;
}

void set_device(const std::string& target, int device_id) {
  const DeviceType type = target_type(target);
  Backend& b = get_backend(type);  // throws naming the supported targets when absent
  // Built but no device (a CUDA build on a machine without a GPU): a different message from "this
  // build has no such backend".
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, b.device_count() > 0, "set_device(\"", target,
                   "\"): this build has the ", b.name(), " backend, but ",
                   b.unavailable_reason().empty() ? "no device is visible" : b.unavailable_reason(),
                   ". Use set_device(\"CPU\") on this machine");
  SPORE_CHECK(device_id >= 0 && device_id < b.device_count(), "set_device: device_id ", device_id,
              " is out of range for ", b.name(), ", which has ", b.device_count(), " device(s)");
  g_device = Device{type, device_id};
}
Device current_device() { return t_has_device ? t_device : g_device; }
int device_count() { return get_backend(current_device().type).device_count(); }
void synchronize(Device device) { get_backend(device.type).synchronize(device.index); }
DeviceGuard::DeviceGuard(Device device) : prev_(t_device), had_prev_(t_has_device) {
  t_device = device;
  t_has_device = true;
}
DeviceGuard::~DeviceGuard() {
  t_device = prev_;
  t_has_device = had_prev_;
}

std::string mode_name(Mode m) { return m == Mode::Graph ? "graph" : "pynative"; }
Mode mode_from_name(const std::string& s) {
  std::string n = s;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "graph" || n == "graph_mode") return Mode::Graph;
  if (n == "pynative" || n == "pynative_mode" || n == "eager") return Mode::PyNative;
  SPORE_THROW(ErrorKind::ValueError, "unknown mode '", s, "'; expected 'graph' or 'pynative'");
}

}  // namespace spore
