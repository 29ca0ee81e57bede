// The activation in the epilogue of the constant-weight convolutions (conv_packed.h,
// conv_winograd.h): their "act" attribute, which the constant_convs pass copies from the
// conv2d_fused it replaces.
#pragma once
#include <string>

namespace spore::cpu {

enum class ConvAct { kNone, kRelu, kSilu, kSigmoid };

// Whether the epilogue has `act`: "" / "relu" / "silu" / "sigmoid" (YOLOv5's detect convs). The
// ops' shape inference refuses anything else before a kernel runs; the conv list declines it.
inline bool conv_act_known(const std::string& act) {
  return act.empty() || act == "relu" || act == "silu" || act == "sigmoid";
}
inline ConvAct conv_act(const std::string& act) {
  return act == "relu"      ? ConvAct::kRelu
         : act == "silu"    ? ConvAct::kSilu
         : act == "sigmoid" ? ConvAct::kSigmoid
                            : ConvAct::kNone;
}

}  // namespace spore::cpu
