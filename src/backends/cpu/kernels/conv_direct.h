// Direct NCHW float32 convolution for very few input channels (a network's first conv: LeNet's
// 1 -> 6 5x5, ResNet's CIFAR stem 3 -> 64 3x3): forward (+ bias, + relu) and weight gradient.
// Defined in conv_direct.cpp; the direct_nchw entry of the convolution lists (conv_list.h), taken
// where it beats oneDNN (timed at the first call of each geometry), which at C_in <= 4 mostly pays
// for its blocked-layout reorders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace spore::cpu {

// groups == 1. OH / OW are given, so the bottom / right padding is implied (rows and columns past
// the input read as zero); dh / dw are the dilations (1 = dense).
struct DirectConvGeom {
  int64_t N, C, H, W, O, kh, kw, OH, OW;
  int64_t sh, sw, pt, pl, dh, dw;
};

// Whether the direct kernels take this geometry: C <= 4, at most 256 taps (C * kh * kw) and a
// per-thread scratch under 32 MiB; why_not says why not ("" when they do).
std::string direct_conv_why_not(const DirectConvGeom& g);
bool direct_conv_supported(const DirectConvGeom& g);

// y (N, O, OH, OW) = [relu](conv(x (N, C, H, W), w (O, C, kh, kw)) + b (O)); b may be null.
void conv2d_direct_forward(const DirectConvGeom& g, const float* x, const float* w, const float* b,
                           bool relu, float* y);
// The forward in groups of output rows handed to a consumer instead of written to y (the conv +
// max-pool fusion, conv_pool_fused.cpp): per task (n, block of output channels [o0, o0 + cnt)),
// rows [oh0, oh0 + rows) for oh0 = 0, R, 2R, ... below oh_end are computed (same arithmetic as
// conv2d_direct_forward) into a per-thread buffer buf (cnt, rows, OW), then
// sink(ctx, n, o0, cnt, oh0, rows, buf) runs on that thread. Tasks run in parallel; a task's
// groups in order. 64 floats past the end of buf may be read (whole-vector loads; values unset).
using DirectRowSink = void (*)(void* ctx, int64_t n, int64_t o0, int64_t cnt, int64_t oh0,
                               int64_t rows, const float* buf);
void conv2d_direct_forward_rows(const DirectConvGeom& g, const float* x, const float* w,
                                const float* b, bool relu, int64_t R, int64_t oh_end,
                                DirectRowSink sink, void* ctx);
// dw (O, C, kh, kw) = sum over n, oh, ow of dy (N, O, OH, OW) * x (N, C, H, W) through the window.
void conv2d_direct_backward_weight(const DirectConvGeom& g, const float* dy, const float* x,
                                   float* dw);

// Test hooks: the Highway targets this build has and this CPU runs (names such as "AVX3", "AVX2"),
// and limiting dispatch to one of them (an empty name restores the ISA's list, backends/cpu/isa.h).
// Process-wide: tests only.
std::vector<std::string> direct_conv_targets();
void direct_conv_use_target(const std::string& name);

}  // namespace spore::cpu
