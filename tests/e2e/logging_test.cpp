// The library's diagnostics through its levelled logger, seen from outside: the CLI's SPORE_PROFILE
// report comes as "[spore info] profile: ..." lines on stderr, SPORE_LOG_LEVEL=warn silences it,
// and a SPORE_LOG_LEVEL that is not a level is reported, not ignored (docs/debugging.md).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Output {
  int code;
  std::string err;
};
// Runs the build's CLI with `env` (VAR=value ...) and returns its stderr (stdout discarded).
Output run_spore(const std::string& env, const std::string& args) {
  const std::string cmd = "env OMP_NUM_THREADS=2 " + env + " " + std::string(SPORE_BINARY_DIR) +
                          "/spore " + args + " 2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string err;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) err.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), err};
}

class Logging : public testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::temp_directory_path() / ("spore_logging_" + std::to_string(getpid()));
    args_ = "train mlp-regression --epochs 1 --limit 256 --eval-limit 64 --mode graph --out " +
            out_.string();
  }
  void TearDown() override { fs::remove_all(out_); }
  fs::path out_;
  std::string args_;
};

TEST_F(Logging, ProfileReportIsInfoLines) {
  const Output r = run_spore("SPORE_PROFILE=1", args_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[spore info] profile: graph "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" ms per run in kernels\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" nodes "), std::string::npos) << r.err;  // the per-op rows
}

TEST_F(Logging, LogLevelWarnSilencesTheProfileReport) {
  const Output r = run_spore("SPORE_PROFILE=1 SPORE_LOG_LEVEL=warn", args_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("profile:"), std::string::npos) << r.err;
}

TEST_F(Logging, AnUnknownLogLevelIsReported) {
  const Output r = run_spore("SPORE_LOG_LEVEL=loud", "--version");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(
      r.err.find("[spore warning] SPORE_LOG_LEVEL=loud is not one of trace, debug, info, warn, "
                 "error, critical, off; using info"),
      std::string::npos)
      << r.err;
}

}  // namespace
