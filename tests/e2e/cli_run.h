// Shared by the CLI end-to-end tests: run the built `spore` binary and capture its output, and a
// fresh temporary folder per test.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace spore::e2e {

inline const std::string kSpore = std::string(SPORE_BINARY_DIR) + "/spore";

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

// `spore <args>` through the shell, with `env` ("NAME=value ...") in front.
inline Result run(const std::string& args, const std::string& env = "") {
  std::string cmd = "OMP_NUM_THREADS=2 " + env + " " + kSpore + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// <tmp>/<prefix><name>_<pid>, emptied.
inline std::filesystem::path temp_dir(const std::string& prefix, const std::string& name) {
  auto d =
      std::filesystem::temp_directory_path() / (prefix + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace spore::e2e
