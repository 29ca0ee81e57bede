// Execution context: the mode (Graph or PyNative, MindSpore's names and values) and the device.
#pragma once
#include <optional>
#include <string>

#include "spore/device.h"

namespace spore {

enum class Mode { Graph = 0, PyNative = 1 };

// set_context changes only the fields given (MindSpore's keyword arguments):
//   set_context({.mode = Mode::Graph});
//   set_context({.save_graphs = true, .save_graphs_path = "out/ir"});
struct ContextOptions {
  std::optional<Mode> mode;                     // default PyNative
  std::optional<bool> save_graphs;              // Graph mode: write the IR after every pass
  std::optional<std::string> save_graphs_path;  // ... into this folder (default "./graphs")
};

void set_context(const ContextOptions& opts);
Mode get_context_mode();
// Where Graph mode dumps its IR (one text file per pass and a Graphviz .dot of the final graph),
// or "" when it does not: set_context's save_graphs, else the SPORE_DUMP_IR variable.
std::string save_graphs_path();
// set_device("CPU" | "GPU" | "Ascend", id): throws, naming the targets this build supports,
// when the target is absent.
void set_device(const std::string& target, int device_id = 0);
// Where factories (zeros, rand, tensor...) and new parameters go: the innermost DeviceGuard on this
// thread, else set_device's device. The dispatcher makes the op's device current while its kernel
// runs; data-pipeline threads make the CPU current.
Device current_device();
// The number of devices of the current device's target (MindSpore's get_context("device_num")).
int device_count();
// The devices of a target ("CPU", "GPU", "Ascend", any case) this process sees: 0 when the build
// has no such backend or none is visible (MindSpore's hal.device_count). A ValueError for a name
// that is no target.
int device_count(const std::string& target);
// The host waits until all work queued on the device has run (torch.cuda.synchronize,
// MindSpore's hal.synchronize): for timing, since a device's ops return once queued.
void synchronize(Device device = current_device());
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  Device prev_;
  bool had_prev_;
};
std::string mode_name(Mode m);
Mode mode_from_name(const std::string& s);  // "graph" | "pynative" (any case)

// Seeds the global generator (rand, randn, dropout, initializers, shuffling).
void set_seed(uint64_t seed);
uint64_t get_seed();

// Threads for kernels and oneDNN; 0 = all cores.
void set_num_threads(int n);
int get_num_threads();

// Flush-to-zero / denormals-are-zero for float arithmetic in Spore's kernels (PyTorch's
// torch.set_flush_denormal). On by default (as TensorFlow does): values below 1.2e-38 in float32
// become 0 instead of costing up to 100x per operation on x86 (gradients and momentum buffers
// reach them late in training). Each thread that runs a kernel (the caller and the OpenMP pool
// oneDNN shares) switches to the mode before it; SPORE_FLUSH_DENORMAL=0 turns the default off.
// Returns false where the CPU has no such mode.
bool set_flush_denormal(bool on);
bool flush_denormal();

}  // namespace spore
