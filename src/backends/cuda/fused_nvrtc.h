// NVRTC compilation of generated kernels (fused_codegen.h) to CUBIN, cached in memory and on disk.
// Host-only (NVRTC needs no GPU: tests/cuda/fused_codegen_test.cpp compiles for sm_90 in CI).
//
// The cache key is a 128-bit hash of the source, the target architecture, NVRTC's version and the
// options. On disk: one file per key, `fused-<key>.cubin`, in
//   $SPORE_CUDA_CACHE_DIR, else $XDG_CACHE_HOME/spore/cuda, else ~/.cache/spore/cuda
// (SPORE_CUDA_CACHE_DIR=off: memory only). A file holds a header (magic, key, payload size and
// checksum) then the CUBIN; it is written to a temporary name and renamed, so readers never see a
// partial file, and one that fails any check is ignored and rewritten.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace spore::cuda::nvrtc {

struct Compiled {
  std::shared_ptr<const std::string> cubin;
  enum class From { kCompiled, kMemory, kDisk } from = From::kCompiled;
  std::string key;   // 32 hex digits
  std::string path;  // the cache file ("" without a disk cache)
};

// The CUBIN of `source` for sm_<arch> (90 for sm_90). `what` names the program in errors (an
// NVRTC failure throws an Error carrying `what`, the architecture and NVRTC's log).
Compiled compile(const std::string& source, int arch, const std::string& what);

// The cache key compile() uses (changes with the source, arch, NVRTC's version and options).
std::string cache_key(const std::string& source, int arch);

// The disk cache folder ("" when disabled or no home can be found).
std::string cache_dir();

// NVRTC's version as major * 1000 + minor * 10 (13000 for 13.0).
int version();

// Whether NVRTC can emit a CUBIN for sm_<arch>.
bool supports_arch(int arch);

// What the cache did since the start (tests): compilations, memory hits, disk hits, cache files
// found bad and rebuilt.
struct Stats {
  int64_t compiled = 0, memory_hits = 0, disk_hits = 0, bad_files = 0;
};
Stats stats();
void clear_memory_cache();  // tests: the next compile() looks on disk

}  // namespace spore::cuda::nvrtc
