// The ONNX backend node tests Debian's libonnx-testdata ships (data/node/test_*/model.onnx with
// test_data_set_*/input_*.pb and output_*.pb), run through Spore's importer in Graph mode.
// Every test whose ops the importer maps must match the expected outputs (ONNX's tolerance:
// rtol 1e-3, atol 1e-7); at least 95% of them pass. Every test with an op it does not map must
// fail with "unsupported ONNX op X", never crash. A test that uses a feature the importer refuses
// by name ("unsupported ONNX op ArgMax with select_last_index", STRING tensors, sequences) is
// counted as unsupported and listed separately in the report. The per-op table is printed and
// written to <build>/onnx_node_report.txt. Each test runs in a child process, so a crash is
// reported as a failure of that test (and counts against the importer) instead of ending the run.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "spore/context.h"
#include "spore/onnx.h"
#include "spore/ops.h"

using namespace spore;

namespace {

const char* kData = "/usr/share/libonnx-testdata/data/node";

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}
bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// ONNX 1.12's test data stores bfloat16 tensors as uint16 bit patterns (read as int32 here).
Tensor bf16_bits(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<int32_t> v(size_t(c.numel()));
  const auto* p = static_cast<const uint16_t*>(c.data_ptr());
  for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  return from_buffer(v.data(), c.shape(), kInt32);
}
Tensor from_bf16_bits(const Tensor& t) {
  const std::vector<int32_t> v = t.to_vector<int32_t>();
  std::vector<uint16_t> b(v.begin(), v.end());
  Tensor r = Tensor::empty(t.shape(), kBFloat16);
  if (!b.empty()) std::memcpy(r.data_ptr(), b.data(), b.size() * 2);
  return r;
}

// "" when a matches b within ONNX's tolerance, else what differs.
std::string compare(const Tensor& got0, const Tensor& want) {
  const Tensor got = got0.dtype() == kBFloat16 && want.dtype() == kInt32 ? bf16_bits(got0) : got0;
  if (got.shape() != want.shape())
    return "shape " + shape_str(got.shape()) + " != expected " + shape_str(want.shape());
  const bool fl = is_floating(want.dtype());
  const std::vector<double> g = got.to(kFloat64).to_vector<double>(),
                            w = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (std::isinf(w[i]) && g[i] == w[i]) continue;
    const double tol = fl ? 1e-7 + 1e-3 * std::abs(w[i]) : 0;
    if (!(std::abs(g[i] - w[i]) <= tol))
      return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " != expected " +
             std::to_string(w[i]);
  }
  return "";
}

// The op a test is about: the one whose name is in the test's name, else the graph's first op.
std::string op_of(const std::string& test, const std::vector<std::string>& ops) {
  std::string t;
  for (char ch : test.substr(5))
    t += ch == '_' ? ch : char(std::tolower(static_cast<unsigned char>(ch)));
  std::string best;
  for (const auto& op : ops) {
    std::string lo;
    for (char ch : op) lo += char(std::tolower(static_cast<unsigned char>(ch)));
    std::string flat = t;
    flat.erase(std::remove(flat.begin(), flat.end(), '_'), flat.end());
    if (flat.rfind(lo, 0) == 0 && lo.size() > best.size()) best = op;
  }
  return best.empty() ? (ops.empty() ? "?" : ops[0]) : best;
}

struct Tally {
  int tests = 0, passed = 0, failed = 0, unsupported = 0;
};

// Runs one node test; returns "op\tkind\tmessage".
std::string run_one(const std::string& test, const std::string& dir) {
  std::string op = test;
  auto line = [&](const char* kind, const std::string& msg) {
    std::string m = msg.substr(0, 300);
    std::replace(m.begin(), m.end(), '\n', ' ');
    return op + "\t" + kind + "\t" + m;
  };
  try {
    OnnxModel m = OnnxModel::load(dir + "/model.onnx");
    op = op_of(test, m.op_types());
    if (!m.unsupported_ops().empty()) {
      // The error a user sees: it names the op (and nothing crashes).
      std::vector<Tensor> ins;
      for (const auto& in : m.inputs()) {
        Shape s;
        for (int64_t d : in.shape) s.push_back(d < 0 ? 1 : d);
        ins.push_back(zeros(s, in.dtype));
      }
      try {
        m.run(ins);
        return line("bad_unsupported", "ran although it has unsupported ops");
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find("unsupported ONNX op") == std::string::npos)
          return line("bad_unsupported", "error without \"unsupported ONNX op\": " + msg);
      }
      return line("unsupported", "");
    }
    for (const std::string& ds : list_dir(dir)) {
      if (ds.rfind("test_data_set_", 0) != 0) continue;
      std::vector<Tensor> ins, want;
      for (size_t k = 0; exists(dir + "/" + ds + "/input_" + std::to_string(k) + ".pb"); ++k) {
        Tensor t = load_onnx_tensor(dir + "/" + ds + "/input_" + std::to_string(k) + ".pb");
        if (k < m.inputs().size() && m.inputs()[k].dtype == kBFloat16 && t.dtype() == kInt32)
          t = from_bf16_bits(t);
        ins.push_back(t);
      }
      for (size_t k = 0; exists(dir + "/" + ds + "/output_" + std::to_string(k) + ".pb"); ++k)
        want.push_back(load_onnx_tensor(dir + "/" + ds + "/output_" + std::to_string(k) + ".pb"));
      const std::vector<Tensor> got = m.run(ins);
      for (size_t k = 0; k < want.size(); ++k) {
        if (k >= got.size()) return line("fail", "missing output " + std::to_string(k));
        if (std::string d = compare(got[k], want[k]); !d.empty())
          return line("fail", "output " + std::to_string(k) + ": " + d);
      }
    }
    return line("pass", "");
  } catch (const Error& e) {
    // A feature the importer refuses by name (an op's attribute value, a tensor type, sequences):
    // counted with the unsupported tests, and listed in the report.
    const std::string msg = e.what();
    if (e.kind() == ErrorKind::NotImplemented && msg.find("unsupported ONNX") != std::string::npos)
      return line("unsupported_feature", msg);
    return line("fail", msg);
  } catch (const std::exception& e) {
    return line("fail", std::string("not a spore::Error: ") + e.what());
  }
}

}  // namespace

TEST(OnnxNodeTests, ConformanceOfSupportedOps) {
  if (!exists(kData))
    GTEST_SKIP() << kData
                 << " is missing (Debian package libonnx-testdata; scripts/setup.sh installs it)";
  std::map<std::string, Tally> per_op;
  std::vector<std::string> failures, crashes, features;
  for (const std::string& test : list_dir(kData)) {
    const std::string dir = std::string(kData) + "/" + test;
    if (!exists(dir + "/model.onnx")) continue;
    int fd[2];
    ASSERT_EQ(pipe(fd), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // child: one line "op\tkind\tmessage", kind one of pass fail unsupported
                     // bad_unsupported
      close(fd[0]);
      // One thread: when an earlier test of this binary ran in this process (./test_onnx without a
      // filter), the parent's OpenMP pool exists, and libgomp's pool does not survive fork (a
      // parallel region in the child waits for threads that are not there).
      set_num_threads(1);
      const std::string line = run_one(test, dir);
      if (write(fd[1], line.data(), line.size()) < 0) _exit(2);
      _exit(0);
    }
    close(fd[1]);
    std::string line;
    char buf[4096];
    for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) line.append(buf, size_t(n));
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (line.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      Tally& t = per_op[test];
      ++t.tests, ++t.failed;
      failures.push_back(test + ": the process died (" +
                         (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : std::string("no result")) +
                         ")");
      crashes.push_back(test + ": crashed");
      continue;
    }
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    const std::string op = line.substr(0, a), kind = line.substr(a + 1, b - a - 1),
                      msg = line.substr(b + 1);
    Tally& t = per_op[op];
    ++t.tests;
    if (kind == "pass")
      ++t.passed;
    else if (kind == "unsupported")
      ++t.unsupported;
    else if (kind == "unsupported_feature")
      ++t.unsupported, features.push_back(test + ": " + msg);
    else if (kind == "bad_unsupported")
      ++t.unsupported, crashes.push_back(test + ": " + msg);
    else
      ++t.failed, failures.push_back(test + ": " + msg);
  }
  int tests = 0, passed = 0, failed = 0, unsupported = 0;
  std::string report = "op                          tests passed failed unsupported\n";
  for (const auto& [op, t] : per_op) {
    char line[160];
    std::snprintf(line, sizeof line, "%-27s %5d %6d %6d %11d\n", op.c_str(), t.tests, t.passed,
                  t.failed, t.unsupported);
    report += line;
    tests += t.tests, passed += t.passed, failed += t.failed, unsupported += t.unsupported;
  }
  char total[200];
  std::snprintf(total, sizeof total,
                "total: %d tests; %d with supported ops: %d passed, %d failed (%.1f%%); %d with "
                "unsupported ops\n",
                tests, passed + failed, passed, failed,
                100.0 * passed / std::max(1, passed + failed), unsupported);
  report += total;
  report += "\nunsupported features of supported ops (counted as unsupported):\n";
  for (const auto& f : features) report += "  " + f + "\n";
  report += "\nfailures:\n";
  for (const auto& f : failures) report += "  " + f + "\n";
  std::ofstream(std::string(SPORE_BINARY_DIR) + "/onnx_node_report.txt") << report;
  std::printf("%s", report.c_str());
  for (const auto& c : crashes) ADD_FAILURE() << c;
  EXPECT_GE(passed, int(0.95 * (passed + failed))) << total;
}
