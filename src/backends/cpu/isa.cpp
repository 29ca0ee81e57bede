// The CPU backend's ISA decision (see isa.h).
#include "backends/cpu/isa.h"

#include <hwy/targets.h>

#include <atomic>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

#include "spore/error.h"

namespace spore::cpu {
namespace {

const char* onednn_isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "generic";
  }
}

bool is_avx512(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_mic:
    case dnnl::cpu_isa::avx512_mic_4ops:
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

bool is_avx2(dnnl::cpu_isa isa) {
  return isa == dnnl::cpu_isa::avx2 || isa == dnnl::cpu_isa::avx2_vnni || is_avx512(isa);
}

CpuIsa decide() {
  CpuIsa r;
  dnnl::cpu_isa isa = dnnl::cpu_isa::all;
  try {
    isa = dnnl::get_effective_cpu_isa();
  } catch (const dnnl::error&) {
    // An unknown ISA: treat as generic (8 lanes, Highway uncapped).
  }
  r.onednn = onednn_isa_name(isa);
  r.avx512 = is_avx512(isa);
#if HWY_ARCH_X86
  // Highway's x86 targets above oneDNN's ISA are disabled, so the backend runs one ISA.
  int64_t off = 0;
  if (!r.avx512) off |= HWY_AVX3 | HWY_AVX3_DL;
#ifdef HWY_AVX3_ZEN4
  if (!r.avx512) off |= HWY_AVX3_ZEN4;
#endif
#ifdef HWY_AVX3_SPR
  if (!r.avx512) off |= HWY_AVX3_SPR;
#endif
  if (!is_avx2(isa) && isa != dnnl::cpu_isa::all) off |= HWY_AVX2;
  if (off) hwy::DisableTargets(off);
#endif
  // Highway 1.0.3 (Debian 12) leaves HWY_DYNAMIC_DISPATCH on the disabled targets (measured: under
  // ONEDNN_MAX_CPU_ISA=AVX2 on a Zen 5 the kernels still ran AVX3 code, so the training Winograd
  // declined the 8-lane blocks), while SupportedTargets() honours the cap: pin the dispatch to
  // that list through its mock hook, which the dispatch does read.
  r.highway_targets = hwy::SupportedTargets();
  hwy::SetSupportedTargetsForTest(r.highway_targets);
  const int64_t targets = r.highway_targets & HWY_TARGETS;  // lower bit = better target
  r.highway = hwy::TargetName(targets & -targets);
  r.lanes = r.avx512 ? 16 : 8;
  if (const char* e = std::getenv("SPORE_BLOCKED_LANES"); e && *e) {
    const std::string v = e;
    SPORE_CHECK(v == "8" || v == "16", "SPORE_BLOCKED_LANES must be 8 or 16 (the channel block of ",
                "Graph mode's blocked layout), got '", v, "'; unset it to follow the ISA (",
                r.lanes, " here)");
    r.lanes = std::stoi(v);
    r.lanes_forced = true;
  }
  return r;
}

}  // namespace

std::string CpuIsa::str() const {
  return "oneDNN " + onednn + ", Highway " + highway + ", blocked layout nChw" +
         std::to_string(lanes) + "c" + (lanes_forced ? " (SPORE_BLOCKED_LANES)" : "");
}

const CpuIsa& cpu_isa() {
  static const CpuIsa isa = decide();
  return isa;
}

namespace {
std::atomic<int64_t> g_lanes_override{0};
}
int64_t blocked_lanes() {
  const int64_t o = g_lanes_override.load();
  return o ? o : cpu_isa().lanes;
}
ScopedBlockedLanes::ScopedBlockedLanes(int64_t lanes) : old_(g_lanes_override.load()) {
  SPORE_CHECK(lanes == 8 || lanes == 16, "ScopedBlockedLanes: lanes must be 8 or 16, got ", lanes);
  g_lanes_override.store(lanes);
}
ScopedBlockedLanes::~ScopedBlockedLanes() { g_lanes_override.store(old_); }

}  // namespace spore::cpu
