// NVRTC and the CUBIN cache (see fused_nvrtc.h).
#include "backends/cuda/fused_nvrtc.h"

#include <fmt/format.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "spore/error.h"

namespace spore::cuda::nvrtc {
namespace {
namespace fs = std::filesystem;

constexpr const char* kMagic = "SPORE-NVRTC-CUBIN 1";
// --fmad stays at NVRTC's default (true), as nvcc compiles the interpreter.
constexpr const char* kStd = "-std=c++17";

// FNV-1a, 64 bits, from a given offset basis; two bases make the 128-bit key.
uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}
std::string hex128(const std::string& s) {
  return fmt::format("{:016x}{:016x}", fnv1a(s, 0xcbf29ce484222325ull),
                     fnv1a(s, 0x84222325cbf29ce4ull));
}

void check(nvrtcResult r, const char* call) {
  SPORE_CHECK(r == NVRTC_SUCCESS, "[GPU] NVRTC: ", call, " failed: ", nvrtcGetErrorString(r));
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> mem;
  Stats stats;
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: kernels may run during static destruction
  return *c;
}

// Reads a cache file; nullptr when absent or bad (bad: counted).
std::shared_ptr<const std::string> read_file(const std::string& path, const std::string& key,
                                             bool* bad) {
  *bad = false;
  std::ifstream f(path, std::ios::binary);
  if (!f) return nullptr;
  std::string magic, k;
  uint64_t size = 0, sum = 0;
  std::string header;
  std::getline(f, header);
  std::istringstream h(header);
  h >> magic;
  std::string magic2;
  h >> magic2 >> k >> size >> std::hex >> sum;
  magic += " " + magic2;
  auto payload = std::make_shared<std::string>();
  if (h && magic == kMagic && k == key && size > 4 && size < (uint64_t(1) << 30)) {
    payload->resize(size);
    f.read(payload->data(), std::streamsize(size));
    if (f.gcount() == std::streamsize(size) && f.peek() == std::char_traits<char>::eof() &&
        fnv1a(*payload, 0xcbf29ce484222325ull) == sum &&
        payload->compare(0, 4,
                         "\x7f"
                         "ELF") == 0)
      return payload;
  }
  *bad = true;
  return nullptr;
}

// Writes a cache file atomically (a temporary name in the same folder, then rename); a failure is
// logged, not thrown: the kernel works without its file.
void write_file(const std::string& path, const std::string& key, const std::string& cubin) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << kMagic << " " << key << " " << cubin.size() << " " << std::hex
      << fnv1a(cubin, 0xcbf29ce484222325ull) << "\n";
    f.write(cubin.data(), std::streamsize(cubin.size()));
    f.close();
    if (!f) {
      log::debug("[GPU] fused kernel cache: cannot write {}", tmp);
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    log::debug("[GPU] fused kernel cache: cannot rename {} to {}: {}", tmp, path, ec.message());
    fs::remove(tmp, ec);
  }
}

std::string arch_option(int arch) { return fmt::format("--gpu-architecture=sm_{}", arch); }

std::string run_nvrtc(const std::string& source, int arch, const std::string& what) {
  nvrtcProgram prog;
  check(nvrtcCreateProgram(&prog, source.c_str(), "spore_fused.cu", 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  const std::string a = arch_option(arch);
  const char* opts[] = {a.c_str(), kStd};
  const nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
  std::string log;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    nvrtcGetProgramLog(prog, log.data());
    log.resize(log_size - 1);
  }
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    SPORE_THROW(ErrorKind::RuntimeError, "[GPU] fused_elementwise: NVRTC could not compile the ",
                "generated kernel of the program ", what, " for sm_", arch, " (",
                nvrtcGetErrorString(r), "). NVRTC's log:\n", log,
                "\nUnset SPORE_CUDA_FUSED to run the interpreter instead, and report the program.");
  }
  size_t size = 0;
  check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  nvrtcDestroyProgram(&prog);
  return cubin;
}

}  // namespace

int version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return major * 1000 + minor * 10;
}

bool supports_arch(int arch) {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return false;
  std::vector<int> archs(static_cast<size_t>(n), 0);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return false;
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

std::string cache_key(const std::string& source, int arch) {
  return hex128(fmt::format("{}\n{}\nnvrtc {}\n{}\n", arch_option(arch), kStd, version(), source));
}

std::string cache_dir() {
  if (const char* d = std::getenv("SPORE_CUDA_CACHE_DIR"); d && *d)
    return std::string(d) == "off" ? "" : std::string(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "spore" / "cuda").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "spore" / "cuda").string();
  return "";
}

Compiled compile(const std::string& source, int arch, const std::string& what) {
  Compiled c;
  c.key = cache_key(source, arch);
  Cache& C = cache();
  {
    std::lock_guard<std::mutex> lock(C.mu);
    if (auto it = C.mem.find(c.key); it != C.mem.end()) {
      ++C.stats.memory_hits;
      c.cubin = it->second;
      c.from = Compiled::From::kMemory;
      return c;
    }
  }
  const std::string dir = cache_dir();
  if (!dir.empty()) c.path = (fs::path(dir) / ("fused-" + c.key + ".cubin")).string();
  bool bad = false;
  if (!c.path.empty()) c.cubin = read_file(c.path, c.key, &bad);
  if (c.cubin) {
    c.from = Compiled::From::kDisk;
  } else {
    if (bad) log::debug("[GPU] fused kernel cache: {} is damaged; compiling again", c.path);
    c.cubin = std::make_shared<const std::string>(run_nvrtc(source, arch, what));
    if (!c.path.empty()) write_file(c.path, c.key, *c.cubin);
  }
  std::lock_guard<std::mutex> lock(C.mu);
  if (c.from == Compiled::From::kDisk)
    ++C.stats.disk_hits;
  else
    ++C.stats.compiled;
  if (bad) ++C.stats.bad_files;
  C.mem.emplace(c.key, c.cubin);
  return c;
}

Stats stats() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().stats;
}

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().mem.clear();
}

}  // namespace spore::cuda::nvrtc
