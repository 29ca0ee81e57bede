// Backends built as their own libraries (the CUDA backend, libspore_cuda.so) are loaded here, once,
// before the first lookup of a backend: libspore itself links no CUDA library, so it runs where
// none is installed, and a CUDA build finds its GPU backend next to it. Loading runs the plugin's
// registrations (SPORE_REGISTER_BACKEND, SPORE_KERNEL) into this library's tables.
//   SPORE_CUDA_LIBRARY=path   load this file instead of <libspore's folder>/libspore_cuda.so
//   SPORE_DISABLE_CUDA=1      do not load it (the CPU only, as on a machine without CUDA)
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include "backends/backend.h"

namespace spore::detail {
namespace {

std::string& cuda_status() {
  static std::string s;
  return s;
}

std::string libspore_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&libspore_dir), &info) && info.dli_fname)
    return std::filesystem::path(info.dli_fname).parent_path().string();
  return ".";
}

void load_cuda() {
  if (const char* off = std::getenv("SPORE_DISABLE_CUDA"); off && std::string(off) == "1") {
    cuda_status() = "the CUDA backend is disabled by SPORE_DISABLE_CUDA=1";
    return;
  }
  const char* env = std::getenv("SPORE_CUDA_LIBRARY");
  const std::string path = env && *env ? env : libspore_dir() + "/libspore_cuda.so";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    cuda_status() = "this build has no CUDA backend (" + path +
                    " not found): rebuild with the CUDA toolkit installed (cmake -DSPORE_CUDA=ON)";
    return;
  }
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = dlerror();
    cuda_status() = "the CUDA backend " + path + " did not load: " + (why ? why : "unknown error") +
                    " (are the CUDA libraries it needs, cuBLASLt and cuDNN, on LD_LIBRARY_PATH?)";
  }
}

}  // namespace

void load_backend_plugins() {
  static std::once_flag once;
  std::call_once(once, load_cuda);
}

const std::string& cuda_plugin_status() { return cuda_status(); }

}  // namespace spore::detail
