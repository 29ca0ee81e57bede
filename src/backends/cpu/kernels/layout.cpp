// ToBlocked / FromBlocked on the CPU (backends/cpu/ops/layout.cpp): NCHW <-> nChw16c / nChw8c held
// as (N, Cb, H, W, L), L = 16 or 8.
//   Contiguous float32 / bfloat16: a cached oneDNN reorder (the same reorder the convolutions ran
//     internally before the layout pass).
//   Strided inputs of to_blocked (an expand view with zero strides, a slice) and float16: a loop.
// Every blocked output gets zeros in its padding lanes (c >= C), which the contract requires and
// which zero_blocked_padding (also used by nn_conv.cpp) writes explicitly rather than relying on
// what a oneDNN implementation happens to leave there.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/layout.h"
#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/onednn/onednn.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"

namespace spore::cpu {

void zero_blocked_padding(void* data, int64_t N, int64_t C, int64_t HW, size_t esize,
                          int64_t lanes) {
  const int64_t L = lanes, used = C % L;
  if (used == 0 || N * HW == 0) return;
  const int64_t Cb = (C + L - 1) / L;
  char* base = static_cast<char*>(data);
  const size_t gap = size_t(L - used) * esize;
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(HW, 1)),
               [&](int64_t n0, int64_t n1) {
                 for (int64_t n = n0; n < n1; ++n) {
                   char* p = base + size_t((n * Cb + Cb - 1) * HW * L + used) *
                                        esize;  // lane `used` of (n, Cb-1, 0)
                   for (int64_t i = 0; i < HW; ++i) std::memset(p + size_t(i * L) * esize, 0, gap);
                 }
               });
}

namespace {

// The cached reorder between the logical (N, C, H, W) nchw and aBcd16b / aBcd8b descriptions.
std::shared_ptr<onednn::Compiled> layout_reorder(bool to_blocked, const Shape& logical, DType t,
                                                 int64_t lanes) {
  onednn::CacheKey key;
  key.add(int64_t(to_blocked ? op::ToBlocked() : op::FromBlocked())).add(int64_t(t)).add(logical);
  key.add(lanes);
  return onednn::cached(key, [&]() -> std::shared_ptr<onednn::Compiled> {
    const onednn::dims d = onednn::to_dims(logical);
    const dnnl::memory::desc plain{d, onednn::to_dnnl(t), onednn::tag::nchw};
    const dnnl::memory::desc blocked{d, onednn::to_dnnl(t), onednn::blocked_tag(lanes)};
    const auto& src = to_blocked ? plain : blocked;
    const auto& dst = to_blocked ? blocked : plain;
    dnnl::engine& eng = onednn::engine();
    auto pd =
        SPORE_DNNL_CHECK(dnnl::reorder::primitive_desc(eng, src, eng, dst, onednn::default_attr()),
                         "layout reorder between nchw and nChw16c / nChw8c");
    return std::make_shared<onednn::Compiled>(
        dnnl::reorder(pd), pd,
        std::vector<onednn::ArgSpec>{{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst, true}});
  });
}

// Elements a thread copies at least: waking a second thread costs about as much as copying
// 100-200 KiB (more on a busy machine), so smaller tensors (ResNet-18's last (1, 512, 4, 4) map
// at batch 1) are copied by the calling thread.
constexpr int64_t kMinPerThread = 32768;

bool reorder_type(DType t) { return t == kFloat32 || t == kBFloat16; }

// y (N, Cb, H, W, L) contiguous from x (N, C, H, W) with any strides (in elements, may be 0).
template <typename E>
void to_blocked_loop(const Tensor& x, Tensor& y) {
  const Shape& s = x.shape();
  const Shape& st = x.strides();
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3], L = y.size(4), Cb = (C + L - 1) / L;
  const E* xp = static_cast<const E*>(x.data_ptr());
  E* yp = static_cast<E*>(y.data_ptr());
  parallel_for(0, N * Cb * H, std::max<int64_t>(1, kMinPerThread / std::max<int64_t>(W * L, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t h = r % H, cb = (r / H) % Cb, n = r / (H * Cb);
                   E* out = yp + r * W * L;  // row (n, cb, h) of the blocked tensor
                   const int64_t lanes = std::min<int64_t>(L, C - cb * L);
                   for (int64_t w = 0; w < W; ++w) {
                     const E* in = xp + n * st[0] + cb * L * st[1] + h * st[2] + w * st[3];
                     for (int64_t l = 0; l < lanes; ++l) out[w * L + l] = in[l * st[1]];
                     for (int64_t l = lanes; l < L; ++l) out[w * L + l] = E(0);
                   }
                 }
               });
}

// y (N, C, H, W) contiguous from contiguous x (N, Cb, H, W, L).
template <typename E>
void from_blocked_loop(const Tensor& x, Tensor& y) {
  const Shape& s = y.shape();
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3], L = x.size(4), Cb = (C + L - 1) / L;
  const E* xp = static_cast<const E*>(x.data_ptr());
  E* yp = static_cast<E*>(y.data_ptr());
  parallel_for(0, N * C, std::max<int64_t>(1, kMinPerThread / std::max<int64_t>(HW, 1)),
               [&](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) {
                   const int64_t n = p / C, c = p % C;
                   const E* in = xp + (n * Cb + c / L) * HW * L + c % L;
                   E* out = yp + p * HW;
                   for (int64_t i = 0; i < HW; ++i) out[i] = in[i * L];
                 }
               });
}

template <template <typename> class Loop>
void by_size(const Tensor& x, Tensor& y) {
  if (itemsize(x.dtype()) == 4)
    Loop<uint32_t>{}(x, y);
  else
    Loop<uint16_t>{}(x, y);
}
template <typename E>
struct ToLoop {
  void operator()(const Tensor& x, Tensor& y) { to_blocked_loop<E>(x, y); }
};
template <typename E>
struct FromLoop {
  void operator()(const Tensor& x, Tensor& y) { from_blocked_loop<E>(x, y); }
};

void to_blocked_kernel(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];  // (N, C, H, W), any strides
  Tensor& y = ctx.outputs[0];       // (N, Cb, H, W, L)
  if (y.numel() == 0) return;
  if (x.is_contiguous() && reorder_type(x.dtype()) && y.numel() >= 2 * kMinPerThread) {
    layout_reorder(true, x.shape(), x.dtype(), y.size(4))->run({x.data_ptr(), y.data_ptr()});
    zero_blocked_padding(y.data_ptr(), x.size(0), x.size(1), x.size(2) * x.size(3),
                         itemsize(y.dtype()), y.size(4));
    return;
  }
  by_size<ToLoop>(x, y);  // writes the padding zeros itself
}

void from_blocked_kernel(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);  // (N, Cb, H, W, L)
  Tensor& y = ctx.outputs[0];       // (N, C, H, W)
  if (y.numel() == 0) return;
  // oneDNN's reorder wakes the OpenMP threads; a small map is copied here on the calling thread.
  if (reorder_type(x.dtype()) && y.numel() >= 2 * kMinPerThread)
    return layout_reorder(false, y.shape(), x.dtype(), x.size(4))
        ->run({x.data_ptr(), y.data_ptr()});
  by_size<FromLoop>(x, y);
}

}  // namespace

SPORE_CPU_KERNEL(ToBlocked, to_blocked_kernel, kFloat32, kBFloat16, kFloat16);
SPORE_CPU_KERNEL(FromBlocked, from_blocked_kernel, kFloat32, kBFloat16, kFloat16);

}  // namespace spore::cpu
