// The profiler (MindSpore's mindspore.Profiler, torch.profiler): records every op PyNative runs,
// every node a compiled graph runs, training steps, data-pipeline work and collectives, as spans
// (name, category, start, duration, thread, shapes, bytes), and writes them in the Chrome
// trace-event format (open trace.json in https://ui.perfetto.dev or chrome://tracing; nothing is
// uploaded anywhere) plus a summary table of the top ops.
//
//   spore::Profiler prof({.output_path = "out/prof"});   // starts recording
//   model.train(1, data);
//   std::cout << prof.analyse();                          // stops, writes the files, summary
//
// `spore train ... --profile DIR` does the same for the CLI. When no profiler runs, recording costs
// one relaxed atomic load per span.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

namespace spore {

struct ProfilerOptions {
  std::string output_path = "./profiler_data";  // trace.json and summary.txt go here
};

class Profiler {
 public:
  explicit Profiler(ProfilerOptions opts = {});  // starts recording (one profiler at a time)
  ~Profiler();                                   // stops recording
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  void start();
  void stop();
  // Stops, writes <output_path>/trace.json and <output_path>/summary.txt (creating the folder),
  // and returns the summary: ops by total time with their share of the profiled wall time.
  std::string analyse();

 private:
  ProfilerOptions opts_;
  int64_t started_ns_ = 0, wall_ns_ = 0;
};

namespace profiling {
namespace detail {
extern std::atomic<bool> g_enabled;
void begin(int64_t& start_ns);
void end(const char* category, const char* name, int64_t start_ns, const std::string* args,
         int64_t bytes);
}  // namespace detail

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// A span on this thread from construction to destruction. `name` and `category` must outlive the
// profiler (string literals, op names); `args` is a JSON object's members, e.g. "\"shape\": ...".
class Span {
 public:
  Span(const char* category, const char* name, const std::string* args = nullptr,
       int64_t bytes = -1)
      : category_(category), name_(name), args_(args), bytes_(bytes) {
    if (enabled()) {
      detail::begin(start_ns_);
      active_ = true;
    }
  }
  ~Span() {
    if (active_) detail::end(category_, name_, start_ns_, args_, bytes_);
  }
  bool active() const { return active_; }
  void set_bytes(int64_t b) { bytes_ = b; }
  void set_args(const std::string* a) { args_ = a; }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* category_;
  const char* name_;
  const std::string* args_;
  int64_t bytes_;
  int64_t start_ns_ = 0;
  bool active_ = false;
};

}  // namespace profiling
}  // namespace spore
