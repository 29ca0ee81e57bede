// Loading the CUDA backend (src/backends/plugins.cpp), through the `spore` CLI in child processes,
// since the plugin is loaded once per process: libspore runs CPU work where libspore_cuda.so is
// absent, disabled (SPORE_DISABLE_CUDA=1) or broken, and set_device("GPU") then says why, in words
// that differ from the "built, but no GPU is visible" message. Runs without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace {
namespace fs = std::filesystem;

// The CLI and libspore's folder: the build tree's, or (in the GPU machine's bundle, where the build
// tree does not exist) SPORE_CLI and SPORE_LIB_DIR.
fs::path from_env(const char* name, const fs::path& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? fs::path(v) : fallback;
}
const fs::path kCli = from_env("SPORE_CLI", fs::path(SPORE_BINARY_DIR) / "spore");
const fs::path kLibDir = from_env("SPORE_LIB_DIR", SPORE_BINARY_DIR);

// Runs `env... spore args` and returns its output (stdout and stderr).
std::string run(const std::string& env, const std::string& args) {
  const std::string cmd = env + " " + kCli.string() + " " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), int(buf.size()), p)) out += buf.data();
  pclose(p);
  return out;
}

const char* kGpuRun = "train mlp-regression --device GPU --epochs 1 --out /dev/null/x";

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(PluginLoading, WithoutTheLibraryCpuWorkRunsAndGpuSaysTheBuildHasNone) {
  // libspore copied alone into a folder: it looks for libspore_cuda.so next to itself.
  const fs::path dir = fs::temp_directory_path() / ("spore_plugin_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kLibDir))
    if (e.path().filename().string().rfind("libspore.so", 0) == 0)
      fs::copy(e.path(), dir / e.path().filename(),
               fs::copy_options::copy_symlinks | fs::copy_options::overwrite_existing);
  const char* path = std::getenv("LD_LIBRARY_PATH");
  const std::string env = "LD_LIBRARY_PATH=" + dir.string() +
                          (path && *path ? ":" + std::string(path) : "") + " SPORE_CUDA_LIBRARY=";
  const std::string check = run(env, "run-check");
  EXPECT_TRUE(contains(check, "device targets in this build: ['CPU']")) << check;
  EXPECT_TRUE(contains(check, "installed on platform [CPU] successfully")) << check;
  const std::string gpu = run(env, kGpuRun);
  EXPECT_TRUE(contains(gpu, "this build has no CUDA backend (" +
                                (dir / "libspore_cuda.so").string() + " not found)"))
      << gpu;
  EXPECT_TRUE(contains(gpu, "-DSPORE_CUDA=ON")) << gpu;
  fs::remove_all(dir);
}

TEST(PluginLoading, DisabledByTheEnvironment) {
  const std::string check = run("SPORE_DISABLE_CUDA=1", "run-check");
  EXPECT_TRUE(contains(check, "device targets in this build: ['CPU']")) << check;
  EXPECT_TRUE(contains(check, "successfully")) << check;
  const std::string gpu = run("SPORE_DISABLE_CUDA=1", kGpuRun);
  EXPECT_TRUE(contains(gpu, "disabled by SPORE_DISABLE_CUDA=1")) << gpu;
}

TEST(PluginLoading, ABrokenLibraryGivesTheLoadersReason) {
  const fs::path bad =
      fs::temp_directory_path() / ("spore_bad_" + std::to_string(::getpid()) + ".so");
  std::ofstream(bad) << "not an ELF file\n";
  const std::string gpu = run("SPORE_CUDA_LIBRARY=" + bad.string(), kGpuRun);
  EXPECT_TRUE(contains(gpu, "did not load")) << gpu;
  EXPECT_TRUE(contains(gpu, bad.string())) << gpu;
  fs::remove(bad);
}

// A __device__-only function called from host code compiles (in a template, nvcc does not object)
// into a host stub that calls exit(1): the process would end without a word at the first launch.
// Nothing else in the backend calls exit, so its import is the sign.
TEST(PluginLoading, NoHostStubOfADeviceFunction) {
  const fs::path lib = kLibDir / "libspore_cuda.so";
  if (!fs::exists(lib)) GTEST_SKIP() << "this build has no CUDA backend (SPORE_CUDA=OFF)";
  if (std::system("command -v nm > /dev/null 2>&1") != 0) GTEST_SKIP() << "no nm (binutils)";
  const std::string cmd = "nm -D --undefined-only " + lib.string() + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), int(buf.size()), p)) out += buf.data();
  pclose(p);
  ASSERT_TRUE(contains(out, "cudnn")) << "nm listed no imports:\n" << out;
  EXPECT_FALSE(contains(out, " exit@") || contains(out, " exit\n"))
      << lib << " imports exit: a host function calls a __device__-only one (make it "
      << "__host__ __device__, or call it in the kernel)";
}

TEST(PluginLoading, BuiltWithoutAGpuSaysNoGpuIsVisible) {
  if (!fs::exists(kLibDir / "libspore_cuda.so"))
    GTEST_SKIP() << "this build has no CUDA backend (SPORE_CUDA=OFF)";
  const std::string check = run("", "run-check");
  EXPECT_TRUE(contains(check, "'GPU'")) << check;
  // The libraries it runs on, NCCL included (found as the loader finds it, or said missing).
  for (const char* lib : {"CUDA runtime", "cuBLASLt", "cuDNN", "NVRTC", "NCCL"})
    EXPECT_TRUE(contains(check, lib)) << lib << " missing in:\n" << check;
  if (contains(check, "GPU: 0 device(s)")) {
    const std::string gpu = run("", kGpuRun);
    EXPECT_TRUE(contains(gpu, "this build has the GPU backend, but no GPU is visible")) << gpu;
    EXPECT_FALSE(contains(gpu, "no CUDA backend")) << gpu;
  }
}

}  // namespace
