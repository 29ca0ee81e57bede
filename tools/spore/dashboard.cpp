// `spore dashboard RUN_DIR [--port 8080] [--host 127.0.0.1]`: a small HTTP server (cpp-httplib)
// for one training run's folder: the page (dashboard_page.h), Chart.js from Debian's
// libjs-chart.js, and /api/run, a JSON view of the folder read fresh on every request (so the
// page follows a run that is still training): metrics.jsonl, run.json (the hyper-parameters
// `spore train` records), the checkpoints, and the profiler summary (RUN_DIR/profile/summary.txt or
// RUN_DIR/summary.txt).
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dashboard_page.h"
#include "jobs.h"
#include "spore/error.h"
#include "spore/io/metrics.h"

namespace spore::cli {
namespace {
namespace fs = std::filesystem;

// Where Debian's libjs-chart.js puts the library (scripts/setup.sh installs it).
constexpr const char* kChartJs = "/usr/share/javascript/chart.js/chart.min.js";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string mtime_str(const fs::path& p) {
  std::error_code ec;
  const auto t = fs::last_write_time(p, ec);
  if (ec) return "";
  const auto sys = std::chrono::file_clock::to_sys(t);
  const std::time_t tt = std::chrono::system_clock::to_time_t(sys);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", std::localtime(&tt));
  return b;
}

// metrics.jsonl as an array of objects; a line being written (no newline yet) or unreadable
// numbers are skipped rather than failing the page. The file is appended across restarts of the
// run directory: the rows shown are the current history (io::latest_history's rule: each epoch's
// last row, up to the last row's epoch).
nlohmann::json metrics_rows(const fs::path& dir) {
  std::map<int64_t, nlohmann::json> by_epoch;
  int64_t last_epoch = -1;
  std::ifstream f(dir / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    last_epoch = j.contains("epoch") && j["epoch"].is_number() ? j["epoch"].get<int64_t>() : -1;
    by_epoch[last_epoch] = std::move(j);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (auto& [e, j] : by_epoch)
    if (e <= last_epoch) rows.push_back(std::move(j));
  return rows;
}

nlohmann::json run_json(const fs::path& dir) {
  nlohmann::json run = {
      {"name", dir.filename().string().empty() ? dir.string() : dir.filename().string()}};
  run["metrics"] = metrics_rows(dir);
  run["hyper"] = nlohmann::json::object();
  if (fs::exists(dir / "run.json")) {
    auto h = nlohmann::json::parse(read_file(dir / "run.json"), nullptr, false);
    if (h.is_object()) run["hyper"] = std::move(h);
  }
  nlohmann::json ckpts = nlohmann::json::array();
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::path& d : {dir, dir / "checkpoints"})
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files)
    ckpts.push_back({{"file", fs::relative(p, dir).string()},
                     {"bytes", fs::file_size(p, ec)},
                     {"modified", mtime_str(p)}});
  run["checkpoints"] = std::move(ckpts);
  run["profile"] = nullptr;
  for (const fs::path& p : {dir / "profile" / "summary.txt", dir / "summary.txt"})
    if (fs::exists(p)) {
      run["profile"] = read_file(p);
      break;
    }
  return run;
}

httplib::Server* g_server = nullptr;
void stop_server(int) {
  if (g_server) g_server->stop();
}
}  // namespace

int dashboard(const DashboardArgs& a) {
  const fs::path dir(a.run_dir);
  SPORE_CHECK_KIND(
      ErrorKind::IOError, fs::is_directory(dir), "[dashboard] run folder '", a.run_dir,
      "' does not exist; pass the --out folder of a `spore train` run (e.g. out/lenet)");
  SPORE_CHECK_KIND(
      ErrorKind::IOError, fs::exists(kChartJs), "[dashboard] the charting library ", kChartJs,
      " is missing; install it with `apt-get install libjs-chart.js` (scripts/setup.sh does)");
  const std::string chart_js = read_file(kChartJs);
  httplib::Server server;
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kDashboardPage, "text/html; charset=utf-8");
  });
  server.Get("/chart.js", [&chart_js](const httplib::Request&, httplib::Response& res) {
    res.set_content(chart_js, "application/javascript");
  });
  server.Get("/api/run", [&dir](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(run_json(dir).dump(), "application/json");
  });
  SPORE_CHECK(server.bind_to_port(a.host, a.port), "[dashboard] cannot listen on ", a.host, ":",
              a.port, "; is another program using that port? Pass --port with a free one");
  g_server = &server;
  std::signal(SIGINT, stop_server);
  std::signal(SIGTERM, stop_server);
  std::printf("spore dashboard: serving %s at http://%s:%d/ (Ctrl-C stops)\n", a.run_dir.c_str(),
              a.host.c_str(), a.port);
  std::fflush(stdout);
  server.listen_after_bind();
  g_server = nullptr;
  return 0;
}

}  // namespace spore::cli
