// Direct convolution on Graph mode's blocked activations (nChw16c or nChw8c) with weights packed
// once, when the graph is compiled (constant weights: an imported or frozen model). Defined in
// conv_packed.cpp; the graph pass backends/cpu/passes/constant_convs.cpp decides where it runs.
//
// An implicit GEMM: the output pixels (n, oh, ow), flattened, are the rows; K runs over the taps
// (kh, kw) and input channels; 16 output channels are the columns. A register tile of 6 pixels x
// 16 channels accumulates over all of K, reading the input in place (no im2col buffer): each
// pixel's input for a tap is L consecutive floats per channel block (16, or 8 on AVX2's nChw8c,
// where a group of 16 channels is two blocks). Small maps (a 4x4 map at
// batch 1) fill the rows as well as large ones, which is where oneDNN's direct kernels, blocked
// along the width, lose most.
#pragma once
#include <cstdint>

#include "backends/cpu/kernels/conv_epilogue.h"

namespace spore::cpu {

// x (N, C/L, H, W, L) -> y (N, O/L, OH, OW, L); C and O multiples of 16; groups 1, dilation 1.
// L, the activations' channel block: 16 (nChw16c), or 8 (nChw8c) where packed_takes_lanes(8).
struct PackedConvGeom {
  int64_t N, C, H, W, O, kh, kw, OH, OW, sh, sw, pt, pl;
  int64_t L = 16;
  // The input's block: 0, the same as y's (C a multiple of 16); 1, plain NCHW (N, C, H, W) of any
  // C (a network's stem: its colour channels), read one channel at a time.
  int64_t Lx = 0;
};
// Whether the kernel on this machine reads and writes activations blocked in `lanes` (8 or 16):
// 16 always; 8 where its vectors hold 8 lanes or fewer (AVX2), as one vector never spans two
// blocks. (The packed weights keep 16-channel groups either way.)
bool packed_takes_lanes(int64_t lanes);

// wp (O/16, kh, kw, C, 16) = w[o][c][i][j] * scale[o]; beta (O) = bias * scale + shift. w is
// (O, C, kh, kw), O a multiple of 16, any C; bias, scale and shift may be null (0, 1, 0).
void pack_conv_weights(const float* w, int64_t O, int64_t C, int64_t kh, int64_t kw,
                       const float* bias, const float* scale, const float* shift, float* wp,
                       float* beta);

// y = act(conv(x, w) * scale + beta + residual), act none, relu or silu; residual (y's shape) may
// be null.
void packed_conv2d(const PackedConvGeom& g, const float* x, const float* wp, const float* beta,
                   const float* residual, ConvAct act, float* y);

}  // namespace spore::cpu
