// The ONNX backend node tests Debian's libonnx-testdata ships (data/node/test_*/model.onnx with
// test_data_set_*/input_*.pb and output_*.pb), run through Spore's importer in Graph mode. Every
// test is classified as
//   passed   every output matches (ONNX's tolerance: rtol 1e-3, atol 1e-7), with the dtype and
//            shape the model declares;
//   refused  the importer says it cannot run the model, by name: NotImplemented "unsupported ONNX
//            op X", "... op X with <feature>", "unsupported ONNX type ..." (never a crash);
//   wrong    the model ran and an output differs from ONNX's (value, shape or dtype);
//   error    any other error (a valid model and its test data that Spore fails on).
// The denominator is the tests whose graph inputs are all tensors: the ones with a sequence or
// optional input (ONNX's non-tensor types, which Spore's tensors-only importer refuses) are counted
// apart. The per-op table, the figures and every test that did not pass (with why) are printed
// and written to <build>/onnx_node_report.txt. Each test runs in a child process, so a crash is
// reported as that test's error instead of ending the run. The test fails on any wrong result,
// error or crash, and when fewer than kPassShare of the tensor-input tests pass.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

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

// ONNX's name of a Spore dtype (OnnxValueInfo::onnx_type spells the model's side so).
std::string onnx_name(DType t) {
  switch (t) {
    case kFloat32:
      return "FLOAT";
    case kFloat64:
      return "DOUBLE";
    case kFloat16:
      return "FLOAT16";
    case kBFloat16:
      return "BFLOAT16";
    case kInt8:
      return "INT8";
    case kUInt8:
      return "UINT8";
    case kInt32:
      return "INT32";
    case kInt64:
      return "INT64";
    case kBool:
      return "BOOL";
  }
  return "?";
}

// "" when got matches want (and has the declared ONNX type), else what differs.
std::string compare(const Tensor& got0, const Tensor& want, const std::string& onnx_type) {
  if (onnx_name(got0.dtype()) != onnx_type)
    return std::string("dtype ") + dtype_name(got0.dtype()) + " != declared " + onnx_type;
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

// Tests whose expected outputs were not computed from their own model (ONNX 1.12's generators
// passed an attribute to the reference but not to the node); when such a test's comparison fails
// it is counted with the tests whose data contradict their model, with this reason.
const std::map<std::string, std::string> kDataDefects = {
    {"test_adam_multiple",
     "the expected outputs use epsilon 1e-2, which the node does not carry (it has the default "
     "1e-6)"},
};

// A random op's outputs cannot equal ONNX's recorded draw; what ONNX defines is checked instead:
// the declared dtype and the expected shape, and
//   - Bernoulli (and its expansion through RandomUniformLike): every value 0 or 1;
//   - training-mode Dropout with a ratio r > 0: each output element 0 or x / (1 - r), and the mask
//     (when asked for) true exactly where the element was kept.
// "-" when the test has no random op, "" when the outputs have those properties, else what fails.
std::string check_random(const std::vector<std::string>& ops, const std::vector<Tensor>& ins,
                         const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                         const OnnxModel& m) {
  auto has = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  const bool bernoulli = has("Bernoulli") || has("RandomUniformLike");
  bool dropout = false;
  if (has("Dropout") && ins.size() == 3) {
    const double ratio = ins[1].to(kFloat64).to_vector<double>().at(0);
    dropout = ins[2].to(kFloat64).to_vector<double>().at(0) != 0 && ratio != 0;
  }
  if (!bernoulli && !dropout) return "-";
  if (got.size() < want.size()) return "missing outputs";
  for (size_t k = 0; k < want.size(); ++k) {
    if (onnx_name(got[k].dtype()) != m.outputs()[k].onnx_type)
      return std::string("dtype ") + dtype_name(got[k].dtype()) + " != declared " +
             m.outputs()[k].onnx_type;
    if (got[k].shape() != want[k].shape())
      return "shape " + shape_str(got[k].shape()) + " != expected " + shape_str(want[k].shape());
  }
  const std::vector<double> y = got[0].to(kFloat64).to_vector<double>();
  if (bernoulli) {
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i] != 0 && y[i] != 1) return "element " + std::to_string(i) + " is neither 0 nor 1";
    return "";
  }
  const double scale = 1 / (1 - ins[1].to(kFloat64).to_vector<double>().at(0));
  const std::vector<double> x = ins[0].to(kFloat64).to_vector<double>();
  std::vector<double> mask;
  if (got.size() > 1) mask = got[1].to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < y.size(); ++i) {
    const double kept = x[i] * scale;
    const bool is_kept = std::abs(y[i] - kept) <= 1e-6 + 1e-5 * std::abs(kept);
    if (!is_kept && y[i] != 0)
      return "element " + std::to_string(i) + " is " + std::to_string(y[i]) +
             ", neither 0 nor x / (1 - ratio) = " + std::to_string(kept);
    if (!mask.empty() && kept != 0 && (mask[i] != 0) != is_kept)
      return "mask element " + std::to_string(i) + " disagrees with the output";
  }
  return "";
}

// The classes of a test's outcome (see the top of the file).
const char* const kKinds[] = {"passed", "refused", "wrong", "error", "sequence_input", "bad_data"};
enum Kind { kPassed, kRefused, kWrong, kError, kSequenceInput, kBadData, kNumKinds };

// The share of the tensor-input tests that must pass.
constexpr double kPassShare = 0.90;

// Runs one node test; returns "op\tkind\tmessage".
std::string run_one(const std::string& test, const std::string& dir) {
  std::string op = test;
  auto line = [&](Kind kind, const std::string& msg) {
    std::string m = msg.substr(0, 400);
    std::replace(m.begin(), m.end(), '\n', ' ');
    std::replace(m.begin(), m.end(), '\t', ' ');
    return op + "\t" + kKinds[kind] + "\t" + m;
  };
  bool random = false;
  try {
    OnnxModel m = OnnxModel::load(dir + "/model.onnx");
    op = op_of(test, m.op_types());
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
      // A few tests' data contradict their own model (CastLike's "like" input is (1,) where the
      // model declares (3,4)): Spore checks inputs against the declared shapes, so such a test
      // says nothing about the importer and is counted apart.
      for (size_t k = 0; k < ins.size() && k < m.inputs().size(); ++k) {
        const auto& decl = m.inputs()[k].shape;
        bool fits = decl.empty() || decl.size() == size_t(ins[k].dim());
        for (size_t d = 0; fits && d < decl.size(); ++d)
          fits = decl[d] < 0 || decl[d] == ins[k].shape()[d];
        if (!fits)
          return line(kBadData, ds + " input " + std::to_string(k) + " has shape " +
                                    shape_str(ins[k].shape()) + "; the model declares (" +
                                    m.inputs()[k].dim_names + ")");
      }
      const std::vector<Tensor> got = m.run(ins);
      if (const std::string r = check_random(m.op_types(), ins, got, want, m); r != "-") {
        if (!r.empty()) return line(kWrong, ds + " (random op, checked by its properties): " + r);
        random = true;
        continue;
      }
      for (size_t k = 0; k < want.size(); ++k) {
        if (k >= got.size()) return line(kWrong, "missing output " + std::to_string(k));
        const std::string type = k < m.outputs().size() ? m.outputs()[k].onnx_type : "?";
        if (std::string d = compare(got[k], want[k], type); !d.empty()) {
          if (kDataDefects.count(test)) return line(kBadData, d + "; " + kDataDefects.at(test));
          return line(kWrong, ds + " output " + std::to_string(k) + ": " + d);
        }
      }
    }
    return line(kPassed, random ? "random" : "");
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (e.kind() == ErrorKind::NotImplemented && msg.find("unsupported ONNX") != std::string::npos)
      return line(msg.find("graph input") != std::string::npos &&
                          msg.find("(a sequence, map or optional)") != std::string::npos
                      ? kSequenceInput
                      : kRefused,
                  msg);
    return line(kError, msg);
  } catch (const std::exception& e) {
    return line(kError, std::string("not a spore::Error: ") + e.what());
  }
}

}  // namespace

TEST(OnnxNodeTests, AllNodeTestsPassOrAreRefused) {
  if (!exists(kData))
    GTEST_SKIP() << kData
                 << " is missing (Debian package libonnx-testdata; scripts/setup.sh installs it)";
  std::map<std::string, std::array<int, kNumKinds>> per_op;
  std::array<int, kNumKinds> total{};
  std::array<std::vector<std::string>, kNumKinds> lists;
  int crashes = 0;
  std::vector<std::string> random_tests;  // passed by their properties (check_random)
  for (const std::string& test : list_dir(kData)) {
    const std::string dir = std::string(kData) + "/" + test;
    if (!exists(dir + "/model.onnx")) continue;
    int fd[2];
    ASSERT_EQ(pipe(fd), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // child: one line "op\tkind\tmessage"
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
      ++crashes;
      line = test + "\terror\tthe process died (" +
             (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                  : std::string("no result")) +
             ")";
    }
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    const std::string op = line.substr(0, a), kind = line.substr(a + 1, b - a - 1),
                      msg = line.substr(b + 1);
    const int k = int(std::find(std::begin(kKinds), std::end(kKinds), kind) - std::begin(kKinds));
    ASSERT_LT(k, kNumKinds) << "bad child line: " << line;
    ++per_op[op][size_t(k)];
    ++total[size_t(k)];
    if (k != kPassed) lists[size_t(k)].push_back(test + ": " + msg);
    if (k == kPassed && msg == "random") random_tests.push_back(test);
  }
  std::string report =
      "op                          passed refused  wrong  error seq_input bad_data\n";
  for (const auto& [op, t] : per_op) {
    char line[200];
    std::snprintf(line, sizeof line, "%-27s %6d %7d %6d %6d %9d %8d\n", op.c_str(), t[kPassed],
                  t[kRefused], t[kWrong], t[kError], t[kSequenceInput], t[kBadData]);
    report += line;
  }
  const int all = std::accumulate(total.begin(), total.end(), 0);
  const int tensor_tests = all - total[kSequenceInput] - total[kBadData];
  char figures[500];
  std::snprintf(figures, sizeof figures,
                "%d node tests; not counted: %d with a sequence or optional input, %d whose data "
                "contradict their model; of the %d tensor-input tests: %d passed (%.1f%%), %d "
                "refused, %d wrong, %d error (%d crashed)\n",
                all, total[kSequenceInput], total[kBadData], tensor_tests, total[kPassed],
                100.0 * total[kPassed] / std::max(1, tensor_tests), total[kRefused], total[kWrong],
                total[kError], crashes);
  report += figures;
  report += "\nrandom ops, checked by their properties (passed):\n";
  for (const auto& t : random_tests) report += "  " + t + "\n";
  const char* const titles[] = {
      "", "refused", "WRONG", "ERROR", "sequence or optional input", "data contradict the model"};
  for (int k = kRefused; k < kNumKinds; ++k) {
    report += std::string("\n") + titles[k] + ":\n";
    for (const auto& f : lists[size_t(k)]) report += "  " + f + "\n";
  }
  std::ofstream(std::string(SPORE_BINARY_DIR) + "/onnx_node_report.txt") << report;
  std::printf("%s", report.c_str());
  for (const auto& f : lists[kWrong]) ADD_FAILURE() << "wrong result: " << f;
  for (const auto& f : lists[kError]) ADD_FAILURE() << "error: " << f;
  EXPECT_GE(total[kPassed], int(std::ceil(kPassShare * tensor_tests))) << figures;
}
