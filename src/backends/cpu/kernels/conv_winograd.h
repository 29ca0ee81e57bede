// Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution on Graph mode's blocked activations (nChw16c or
// nChw8c), float32, for convolutions whose weights are constants (an imported or frozen model) or
// train. Defined in conv_winograd.cpp; the graph pass backends/cpu/passes/constant_convs.cpp and
// the convolution lists (nn_conv.cpp) decide where it runs.
//
// A 3x3, stride-1 convolution computes each 2x2 output tile from a 4x4 input patch d as
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
// (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): 16 multiplies per
// tile and channel pair instead of 36, so 2.25x fewer. Summed over input channels, the products
// become 16 independent matrix products, one per element of the 4x4 transformed tile:
//   M[e] (tiles, O) = V[e] (tiles, C) @ U[e] (C, O).
// F(4x4, 3x3) does the same with 4x4 output tiles from 6x6 patches: 36 products per 16 outputs
// (2.25 per output against F(2x2)'s 4), its transforms' constants 2, 4, 5, 8 and G's sixths.
// U (the transformed weights) is computed once, when the graph is compiled; V and M live in a
// per-thread scratch block of tiles and never reach memory as whole tensors.
#pragma once
#include <cstdint>

#include "backends/cpu/kernels/conv_epilogue.h"
#include "backends/cpu/kernels/conv_list.h"

namespace spore::cpu {

// x (N, C/L, H, W, L) -> y (N, O/L, OH, OW, L); C and O multiples of 16; a 3x3 kernel,
// stride 1, dilation 1, groups 1; pt / pl the top / left padding (bottom / right follow from
// OH = H + pt + pb - 2, OW likewise). L, the activations' channel block: 16 (nChw16c), or 8
// (nChw8c, AVX2's) where the kernels' vectors hold at most 8 lanes (winograd_takes_lanes).
// m: the output tile's side, 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)).
struct WinogradGeom {
  int64_t N, C, H, W, O, OH, OW, pt, pl;
  int64_t L = 16;
  int64_t m = 2;
};
// Whether the kernels on this machine read and write activations blocked in `lanes` (8 or 16):
// 16 always; 8 where their vectors hold 8 lanes or fewer (AVX2), as one vector never spans two
// blocks. (The transformed weights and the scratch keep 16-channel groups either way.)
bool winograd_takes_lanes(int64_t lanes);

// The output tile F(m x m, 3x3) a conv of this geometry runs best with (constant weights and all
// three training passes): 4 where
// every thread has at least kMinF4TilesPerThread 4x4 tiles and the transformed weights (36 C O
// floats) stay at most kMaxF4WeightBytes, else 2. F(4x4, 3x3) does 2.25 multiplies per output
// against F(2x2, 3x3)'s 4 (bench_constant_conv, AVX-512, batch 64: ResNet-18's 64c 32x32 conv
// 1.95x faster, 256c 8x8 1.42x), but reads 36/16 the weight bytes once per block of tiles: with few
// tiles (an 8x8 map at batch 1) or weights past the cache (512c: 38 MB) that costs more than it
// saves (512c 4x4 at batch 64: 1.37x slower).
constexpr int64_t kMinF4TilesPerThread = 16;
constexpr int64_t kMaxF4WeightBytes = int64_t(16) << 20;
int64_t winograd_tile(int64_t N, int64_t OH, int64_t OW, int64_t C, int64_t O);

// u (E, O/16, C, 16) = G w[o][c] Gᵀ * scale[o] per (o, c), laid out as E = (m + 2)² matrices
// U[e] (C, O) cut into panels of 16 output channels; beta (O) = bias * scale + shift. w is
// (O, C, 3, 3); bias, scale and shift may be null (0, 1, 0). Folding a BatchNorm's scale into u
// leaves the kernel one add per output. m: the output tile's side (2 or 4).
void winograd_transform_weights(const float* w, int64_t O, int64_t C, const float* bias,
                                const float* scale, const float* shift, float* u, float* beta,
                                int64_t m = 2);

// y = act(conv(x, w) * scale + beta + residual) with act none, relu, silu or sigmoid; residual
// (y's shape)
// may be null. Parallel over blocks of tiles.
void winograd_conv2d(const WinogradGeom& g, const float* x, const float* u, const float* beta,
                     const float* residual, ConvAct act, float* y);

// For the data gradient: u (E, C/16, O, 16) = G w[o][c]' Gᵀ with w' the kernel rotated by 180
// degrees, as E = (m + 2)² matrices U[e] (O, C): the weights of the stride-1 conv dy -> dx.
void winograd_transform_weights_backward_data(const float* w, int64_t O, int64_t C, float* u,
                                              int64_t m = 2);

// The weight gradient in the Winograd domain: dw (O, C, 3, 3) = Gᵀ [sum over tiles of
// (Bᵀ d B)ᵀ (A dY Aᵀ)] G, the 16 sums again matrix products (C, tiles) @ (tiles, O); each thread
// sums its blocks of tiles into its own 16 C O floats, added up at the end. g is the forward conv's
// geometry; x and dy blocked.
void winograd_backward_weight(const WinogradGeom& g, const float* x, const float* dy, float* dw);

// The convolution lists' winograd entry on weights that change every step (training): the
// forward conv (Conv2d / Conv2dFused), the data gradient (Conv2dBackwardData) or the weight
// gradient (Conv2dBackwardWeight) of a 3x3 stride-1
// conv between blocked activations whose channels are multiples of 16 (the entry's predicate,
// nn_conv.cpp, says so). The weights are transformed in the call: once per step and conv.
void winograd_run(ops::KernelContext& ctx, const ConvDesc& d);

}  // namespace spore::cpu
