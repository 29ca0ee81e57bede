// Observability end to end: `spore train --profile` writes a Chrome trace that parses, names the
// ops with their shapes and nests them (ops inside the compiled graph's run inside the training
// step, on one thread); `--dump-ir` writes every pass's graph and a Graphviz file; `spore
// dashboard` serves a page that a real headless Chromium renders with the run's numbers, and that
// follows the metrics file as it grows.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

namespace {
namespace fs = std::filesystem;
const std::string kSpore = std::string(SPORE_BINARY_DIR) + "/spore";
const std::string kData = "/usr/share/datasets/fashion-mnist";

std::string run(const std::string& cmd, int* code = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  if (code) *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("spore_obs_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Observability, ProfileTraceIsValidAndNested) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("prof"), prof = out / "profile", ir = out / "ir";
  int code = 0;
  const std::string log =
      run("OMP_NUM_THREADS=2 " + kSpore +
              " train lenet --epochs 1 --limit 1024 --eval-limit 256 --out " + out.string() +
              " --profile " + prof.string() + " --dump-ir " + ir.string(),
          &code);
  ASSERT_EQ(code, 0) << log;
  EXPECT_NE(log.find("profile:"), std::string::npos) << log;  // the summary is printed
  ASSERT_TRUE(fs::exists(prof / "trace.json")) << log;
  ASSERT_TRUE(fs::exists(prof / "summary.txt"));
  const auto trace = nlohmann::json::parse(slurp(prof / "trace.json"));  // throws if invalid
  const auto& ev = trace.at("traceEvents");
  struct Span {
    std::string cat, name;
    double ts, dur;
    int tid;
  };
  std::vector<Span> spans;
  for (const auto& e : ev) {
    if (e.at("ph") != "X") continue;
    spans.push_back({e.at("cat"), e.at("name"), e.at("ts"), e.at("dur"), e.at("tid")});
    EXPECT_GE(spans.back().dur, 0.0);
    EXPECT_GE(spans.back().ts, 0.0);
    if (spans.back().cat == "op") {  // every op names its operands' dtypes and shapes
      ASSERT_TRUE(e.contains("args")) << e.dump();
      EXPECT_TRUE(e["args"].contains("inputs") && e["args"].contains("outputs")) << e.dump();
    }
  }
  auto count = [&](const std::string& cat, const std::string& name = "") {
    return std::count_if(spans.begin(), spans.end(), [&](const Span& s) {
      return s.cat == cat && (name.empty() || s.name == name);
    });
  };
  EXPECT_EQ(count("train", "step"), 16) << "1024 images / batch 64";
  EXPECT_GE(count("graph"), 16);  // the compiled step (and the compiled eval network)
  EXPECT_GT(count("op", "conv2d_pool_fused") + count("op", "conv2d_fused"), 0);
  EXPECT_GT(count("op", "fused_apply_momentum"), 0);
  EXPECT_GT(count("data"), 0);
  // Nesting: each op of a compiled graph lies inside a graph run on its thread, and each graph
  // run of a training step inside that step.
  auto inside = [](const Span& in, const Span& out) {
    return in.tid == out.tid && in.ts >= out.ts - 1e-3 && in.ts + in.dur <= out.ts + out.dur + 1e-3;
  };
  size_t checked = 0;
  for (const Span& g : spans) {
    if (g.cat != "graph") continue;
    for (const Span& o : spans)
      if (o.cat == "op" && o.tid == g.tid && o.ts >= g.ts && o.ts < g.ts + g.dur) {
        EXPECT_TRUE(inside(o, g)) << o.name << " overlaps the end of graph " << g.name;
        ++checked;
      }
  }
  EXPECT_GT(checked, 100u);
  for (const Span& s : spans)
    if (s.cat == "train") {
      bool has_graph = false;
      for (const Span& g : spans) has_graph = has_graph || (g.cat == "graph" && inside(g, s));
      EXPECT_TRUE(has_graph) << "a training step with no compiled graph run inside it";
    }
  // The summary lists ops by time with their share.
  const std::string summary = slurp(prof / "summary.txt");
  EXPECT_NE(summary.find("share"), std::string::npos) << summary;
  EXPECT_NE(summary.find("fused_apply_momentum"), std::string::npos) << summary;
  // --dump-ir: the traced graph, one file per pass, and the final graph as Graphviz.
  size_t txt = 0, dot = 0;
  bool traced = false;
  for (const auto& e : fs::directory_iterator(ir)) {
    const std::string f = e.path().filename().string();
    txt += e.path().extension() == ".txt";
    dot += e.path().extension() == ".dot";
    traced = traced || f.find(".00.traced.txt") != std::string::npos;
  }
  EXPECT_TRUE(traced);
  EXPECT_GE(txt, 8u);
  EXPECT_GE(dot, 1u);
  fs::remove_all(out);
}

// A `spore dashboard` child process, stopped (SIGTERM) when the test ends.
struct Dashboard {
  pid_t pid = -1;
  Dashboard(const fs::path& dir, int port) {
    pid = fork();
    if (pid == 0) {
      const std::string p = std::to_string(port);
      execl(kSpore.c_str(), kSpore.c_str(), "dashboard", dir.c_str(), "--port", p.c_str(),
            (char*)nullptr);
      _exit(127);
    }
  }
  ~Dashboard() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

// The DOM after the page's scripts ran, from a real headless Chromium.
std::string browser_dom(const std::string& url) {
  return run(
      "timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--no-first-run --virtual-time-budget=6000 --dump-dom " +
      url + " 2>/dev/null");
}

std::string attr(const std::string& dom, const std::string& id_or_tag, const std::string& name) {
  const std::regex re("<" + id_or_tag + "[^>]*" + name + "=\"([^\"]*)\"");
  std::smatch m;
  return std::regex_search(dom, m, re) ? m[1].str() : "";
}

TEST(Observability, DashboardRendersTheRunInChromium) {
  if (system("command -v chromium > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed";
  const fs::path dir = temp_dir("dash");
  const std::vector<std::string> rows = {
      R"({"epoch":1,"loss":0.8123,"eval_loss":0.6234,"accuracy":0.7712,"lr":0.01,"time_s":2.5})",
      R"({"epoch":2,"loss":0.5011,"eval_loss":0.4987,"accuracy":0.8231,"lr":0.01,"time_s":2.4})",
      R"({"epoch":3,"loss":0.4123,"eval_loss":0.4456,"accuracy":0.8467,"lr":0.01,"time_s":2.4})"};
  {
    std::ofstream m(dir / "metrics.jsonl");
    for (const auto& r : rows) m << r << "\n";
    std::ofstream(dir / "run.json") << R"({"model": "lenet", "batch_size": 64, "lr": 0.01})";
    fs::create_directories(dir / "checkpoints");
    std::ofstream(dir / "checkpoints" / "lenet-3.safetensors") << std::string(1234, 'x');
    std::ofstream(dir / "summary.txt")
        << "profile: 12.000 ms wall\n  conv2d_fused  3  1.000  333.33  8.3%\n";
  }
  const int port = 18000 + int(getpid() % 1000);
  Dashboard server(dir, port);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  std::string dom;
  for (int i = 0; i < 40 && attr(dom, "body", "data-epochs").empty(); ++i) {  // until it listens
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    dom = browser_dom(url);
  }
  ASSERT_EQ(attr(dom, "body", "data-epochs"), "3") << dom.substr(0, 3000);
  // Both curves drawn: train + eval loss (3 + 3 points), accuracy (3 points).
  EXPECT_EQ(attr(dom, "canvas id=\"loss-chart\"", "data-points"), "6") << dom.substr(0, 3000);
  EXPECT_EQ(attr(dom, "canvas id=\"acc-chart\"", "data-points"), "3");
  // The numbers in the page are the metrics file's, digit for digit.
  for (const char* v : {"0.8123", "0.6234", "0.7712", "0.5011", "0.8231", "0.4123", "0.8467"})
    EXPECT_NE(dom.find(std::string("<td>") + v + "</td>"), std::string::npos) << v;
  EXPECT_NE(dom.find("lenet-3.safetensors"), std::string::npos);
  EXPECT_NE(dom.find("<td>1234</td>"), std::string::npos);
  EXPECT_NE(dom.find("<td>batch_size</td><td>64</td>"), std::string::npos);
  EXPECT_NE(dom.find("conv2d_fused"), std::string::npos);
  // Live: a fourth epoch written while the server runs shows up on the next load.
  std::ofstream(dir / "metrics.jsonl", std::ios::app)
      << R"({"epoch":4,"loss":0.3789,"eval_loss":0.4301,"accuracy":0.8533,"lr":0.01,"time_s":2.4})"
      << "\n";
  dom = browser_dom(url);
  EXPECT_EQ(attr(dom, "body", "data-epochs"), "4");
  EXPECT_EQ(attr(dom, "canvas id=\"loss-chart\"", "data-points"), "8");
  EXPECT_NE(dom.find("<td>0.8533</td>"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Observability, DashboardErrorsAreClear) {
  int code = 0;
  std::string out = run(kSpore + " dashboard /nonexistent/run", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
  out = run(kSpore + " dashboard /tmp --port 0", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("--port"), std::string::npos) << out;
}

}  // namespace
