// The re-layout primitives of Graph mode's blocked activations (ops/blocked.h): to_blocked and
// from_blocked convert between a logical (N, C, H, W) activation and nChw16c / nChw8c as
// (N, Cb, H, W, L) (to_blocked's attribute lanes: 16 by default, or 8); to_blocked fills the
// padding lanes with zeros. Graph-internal (kNonDiff): the pass inserts them
// into an already differentiated graph. Kernels: backends/cpu/kernels/layout.cpp.
#include "backends/cpu/ops/rules.h"
#include "ops/blocked.h"

namespace spore::cpu::rules {
using namespace ::spore::ops;
namespace {

void check_layout_dtype(const TensorMeta& m) {
  SPORE_CHECK_TYPE(m.dtype == kFloat32 || m.dtype == kBFloat16 || m.dtype == kFloat16,
                   "the blocked layout supports float32, bfloat16 and float16 only, got ",
                   dtype_name(m.dtype));
}

}  // namespace

OpRules ToBlocked() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        const Shape& x = in[0].shape;
        SPORE_CHECK(x.size() == 4, "expected an input of rank 4 (N, C, H, W), got shape ",
                    shape_str(x));
        check_layout_dtype(in[0]);
        const int64_t L = a.get_int("lanes", blocked::kLanes);
        SPORE_CHECK(blocked::valid_lanes(L), "the lanes attribute must be 8 or 16, got ", L);
        return {{blocked::shape(x, L), in[0].dtype}};
      },
  };
}

OpRules FromBlocked() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        const Shape& x = in[0].shape;
        SPORE_CHECK(a.has("channels"), "the 'channels' attribute (the logical C) is required");
        const int64_t C = a.get_int("channels");
        SPORE_CHECK(C > 0, "channels must be positive, got ", C);
        const int64_t L = blocked::lanes_of(x);
        SPORE_CHECK(L != 0,
                    "expected a blocked input (N, ceil(C/L), H, W, L) with L = 8 or 16 for ",
                    "channels=", C, ", got shape ", shape_str(x));
        SPORE_CHECK(x[1] == blocked::blocks(C, L), "expected a blocked input (N, ceil(C/", L,
                    ")=", blocked::blocks(C, L), ", H, W, ", L, ") for channels=", C,
                    ", got shape ", shape_str(x));
        check_layout_dtype(in[0]);
        return {{{x[0], C, x[2], x[3]}, in[0].dtype}};
      },
  };
}

}  // namespace spore::cpu::rules
