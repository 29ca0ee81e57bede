// The profiler (spore/profiler.h). Spans go to a per-thread buffer (a lock per event, never
// contended while recording: only analyse() reads other threads' buffers); analyse() merges them
// into Chrome trace events (nlohmann-json) and a summary table.
#include "spore/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "spore/error.h"

namespace spore {
namespace profiling::detail {
std::atomic<bool> g_enabled{false};
}

namespace {
using profiling::detail::g_enabled;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Event {
  const char* category;
  const char* name;
  int64_t start_ns, dur_ns;
  std::string args;
  int64_t bytes;
};

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;
  int tid = 0;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // kept after their thread ends
  bool running = false;                                // one profiler at a time
};
Registry& registry() {
  static Registry r;
  return r;
}

ThreadBuffer& this_thread_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> buf = [] {
    auto b = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    b->tid = int(r.buffers.size()) + 1;
    r.buffers.push_back(b);
    return b;
  }();
  return *buf;
}

std::string fmt_ms(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", ms);
  return b;
}
}  // namespace

namespace profiling::detail {
void begin(int64_t& start_ns) { start_ns = now_ns(); }
void end(const char* category, const char* name, int64_t start_ns, const std::string* args,
         int64_t bytes) {
  const int64_t t = now_ns();
  ThreadBuffer& b = this_thread_buffer();
  const std::lock_guard lock(b.mutex);
  b.events.push_back({category, name, start_ns, t - start_ns, args ? *args : std::string(), bytes});
}
}  // namespace profiling::detail

Profiler::Profiler(ProfilerOptions opts) : opts_(std::move(opts)) { start(); }
Profiler::~Profiler() { stop(); }

void Profiler::start() {
  Registry& r = registry();
  {
    const std::lock_guard lock(r.mutex);
    SPORE_CHECK_KIND(
        ErrorKind::RuntimeError, !r.running,
        "[Profiler] another profiler is already recording; stop() or analyse() it first");
    r.running = true;
    for (auto& b : r.buffers) {
      const std::lock_guard bl(b->mutex);
      b->events.clear();
    }
  }
  started_ns_ = now_ns();
  wall_ns_ = 0;
  g_enabled.store(true, std::memory_order_relaxed);
}

void Profiler::stop() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (!r.running || started_ns_ == 0) return;
  g_enabled.store(false, std::memory_order_relaxed);
  wall_ns_ = now_ns() - started_ns_;
  r.running = false;
}

std::string Profiler::analyse() {
  stop();
  std::vector<std::pair<int, Event>> all;  // (tid, event)
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    for (auto& b : r.buffers) {
      const std::lock_guard bl(b->mutex);
      for (const Event& e : b->events) all.push_back({b->tid, e});
    }
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.second.start_ns < b.second.start_ns; });
  // Chrome trace events: complete events ("X") in microseconds, one thread name per tid.
  nlohmann::json events = nlohmann::json::array();
  std::map<int, bool> tids;
  for (const auto& [tid, e] : all) {
    nlohmann::json j = {{"name", e.name},
                        {"cat", e.category},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", tid},
                        {"ts", double(e.start_ns - started_ns_) / 1e3},
                        {"dur", double(e.dur_ns) / 1e3}};
    nlohmann::json args =
        e.args.empty() ? nlohmann::json::object() : nlohmann::json::parse("{" + e.args + "}");
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    if (!args.empty()) j["args"] = std::move(args);
    events.push_back(std::move(j));
    tids[tid] = true;
  }
  for (const auto& [tid, _] : tids)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", tid},
                      {"args", {{"name", tid == 1 ? "main" : "thread " + std::to_string(tid)}}}});
  // Summary: ops by total time (nodes of compiled graphs and PyNative ops alike), and the
  // categories' totals. Shares are of the profiled wall time.
  struct Row {
    int64_t ns = 0, count = 0;
  };
  std::map<std::string, Row> ops, cats;
  for (const auto& [tid, e] : all) {
    Row& c = cats[e.category];
    c.ns += e.dur_ns;
    ++c.count;
    if (std::string_view(e.category) == "op") {
      Row& r = ops[e.name];
      r.ns += e.dur_ns;
      ++r.count;
    }
  }
  std::vector<std::pair<std::string, Row>> rows(ops.begin(), ops.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  const double wall_ms = double(wall_ns_) / 1e6;
  std::ostringstream s;
  s << "profile: " << fmt_ms(wall_ms) << " ms wall, " << all.size() << " spans on " << tids.size()
    << " threads\n";
  for (const auto& [cat, r] : cats)
    s << "  " << cat << ": " << r.count << " spans, " << fmt_ms(double(r.ns) / 1e6) << " ms\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-34s %9s %12s %10s %7s\n", "op", "calls", "total ms",
                "avg us", "share");
  s << line;
  const size_t shown = std::min<size_t>(rows.size(), 25);
  for (size_t i = 0; i < shown; ++i) {
    const auto& [name, r] = rows[i];
    std::snprintf(line, sizeof line, "  %-34s %9lld %12.3f %10.2f %6.1f%%\n", name.c_str(),
                  (long long)r.count, double(r.ns) / 1e6, double(r.ns) / 1e3 / double(r.count),
                  100.0 * double(r.ns) / std::max(1.0, double(wall_ns_)));
    s << line;
  }
  if (rows.size() > shown) s << "  (" << rows.size() - shown << " more ops in trace.json)\n";
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(opts_.output_path, ec);
  SPORE_CHECK_KIND(ErrorKind::IOError, !ec, "[Profiler] cannot create output_path '",
                   opts_.output_path, "': ", ec.message(), "; pass a writable folder");
  const std::string trace = (fs::path(opts_.output_path) / "trace.json").string();
  const std::string summary = (fs::path(opts_.output_path) / "summary.txt").string();
  {
    std::ofstream f(trace);
    f << nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump();
    SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[Profiler] cannot write ", trace,
                     "; is the disk full?");
  }
  {
    std::ofstream f(summary);
    f << s.str();
    SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[Profiler] cannot write ", summary,
                     "; is the disk full?");
  }
  return s.str() + "  trace: " + trace + " (open in https://ui.perfetto.dev or chrome://tracing)\n";
}

}  // namespace spore
