// Which convolution implementation runs on the CPU, and why: one ordered list per primitive
// (forward, backward data, backward weight), as oneDNN keeps them (cpu_convolution_list.cpp).
// Each entry has a name and a predicate that says whether it takes a convolution and, when not,
// why; the first entry that takes it runs, and the reference implementation is last. The lists:
//
//   forward          winograd, packed, direct_nchw, onednn, onednn_blocked, onednn_plain,
//                    onednn_via_f32, reference
//   backward data    winograd, onednn, onednn_blocked, onednn_plain, onednn_via_f32, reference
//   backward weight  winograd, direct_nchw, onednn, onednn_blocked, onednn_plain, onednn_via_f32,
//                    reference
//
// winograd (conv_winograd.cpp) takes 3x3 stride-1 convs between blocked activations whose channels
// are multiples of 16. On weights that are graph constants (forward only) the constant_convs pass
// asks this list at compile time and, where winograd or packed (conv_packed.cpp) is chosen,
// prepares the weights once (its conv2d_winograd / conv2d_packed nodes). On weights that change
// (training) the kernels run it: forward, data gradient and weight gradient in the Winograd domain,
// the weights transformed in the call. winograd and direct_nchw (conv_direct.cpp) are the timed
// entries: where one takes a geometry, the first call runs it and the next entry that takes the
// conv (oneDNN) on the call's own buffers and keeps the faster, so it declines geometries where
// oneDNN measured faster (a constant-weight conv, chosen at compile time, is never timed).
// onednn picks its primitive's layouts by timing too, inside the entry (oneDNN's blocked layouts,
// the plain ones, forward_inference: the first call of a geometry builds and times them), and
// onednn_blocked / onednn_plain are the same entry with the layouts fixed (never reached unless
// forced: onednn takes every conv they take).
//
// SPORE_CONV_IMPL (the one switch; docs/debugging.md) narrows the lists, for A/B runs and tests:
//   SPORE_CONV_IMPL=a,b    each list keeps only the named entries it has (a list with none of them
//                          stays whole); forced entries are not timed; a conv that none of the kept
//                          entries takes is an error naming why each declined
//   SPORE_CONV_IMPL=-a,-b  each list drops the named entries
// Unknown names are an error listing the entries. ScopedConvImpl does the same for a scope.
//
// "Which kernel runs for this conv, and why": choose_conv(desc) (ConvChoice::str()); the kernels
// log each first choice per geometry at debug level (SPORE_LOG_LEVEL=debug, `spore train
// --verbose`).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops/op.h"

namespace spore::cpu {

enum class ConvProp { kForward, kBackwardData, kBackwardWeight };

// The oneDNN layout choices the onednn entry made by timing, as text (one "conv COUNT KEY...
// CHOICE" line per geometry), and merging such text in (ValueError naming the line when malformed):
// the CPU backend's Backend::kernel_choices / load_kernel_choices.
std::string conv_choices_text();
void load_conv_choices(const std::string& text);
const char* conv_prop_name(ConvProp p);  // "forward", "backward_data", "backward_weight"

// A convolution as the lists see it: x (N, C, H, W) * w (O, C/G, kh, kw) -> y (N, O, OH, OW),
// whichever the primitive computes from the other two.
struct ConvDesc {
  ConvProp prop = ConvProp::kForward;
  DType dtype = kFloat32;
  int64_t N = 0, C = 0, H = 0, W = 0, O = 0, kh = 0, kw = 0, OH = 0, OW = 0;
  int64_t sh = 1, sw = 1, pt = 0, pb = 0, pl = 0, pr = 0, dh = 1, dw = 1, G = 1;
  bool blocked_x = false, blocked_y = false;  // activations in nChw16c (Graph mode's layout pass)
  int64_t lanes = 16;                         // their channel block: 16, or 8 (nChw8c)
  bool bias = false;                          // forward: a bias input
  // Forward, conv2d_fused: oneDNN post-ops.
  bool fused = false, scale = false, residual = false;
  std::string act;
  // The weight and per-channel inputs are graph constants (set by the constant_convs pass only).
  bool constant_weights = false;
  const ops::Attrs* attrs = nullptr;  // the op's attributes while it runs (post-op parameters)

  // From a Conv2d / Conv2dFused / Conv2dBackwardData / Conv2dBackwardWeight kernel's context.
  static ConvDesc of(ConvProp prop, const ops::KernelContext& ctx);
  // From the shapes as the op holds them (x, y: (N, C, H, W), or (N, Cb, H, W, L) when blocked;
  // w: (O, C/G, kh, kw)), its attributes, whether it is a conv2d_fused and its input count.
  static ConvDesc of(ConvProp prop, const Shape& x, const Shape& w, const Shape& y, DType dtype,
                     const ops::Attrs& a, bool fused, size_t num_inputs);
  // "forward float32 x 64x1x28x28 w 6x1x5x5 -> 64x6x28x28 stride 1x1 pad 2,2,2,2 bias act=relu"
  std::string str() const;
  std::vector<int64_t> key() const;
};

struct ConvImpl {
  const char* name;
  // "" when this entry takes the convolution, otherwise why not (one short clause).
  std::string (*why_not)(const ConvDesc& d);
  // Runs it (null for the entries a graph pass prepares: winograd, packed).
  void (*run)(ops::KernelContext& ctx, const ConvDesc& d);
  // Takes a conv only where it ran faster than the next entry that takes it, timed at the first
  // call of each geometry (direct_nchw).
  bool timed = false;
};

// The ordered list of a primitive (the reference last).
const std::vector<ConvImpl>& conv_impls(ConvProp prop);

struct ConvChoice {
  const ConvImpl* impl = nullptr;                             // null: none takes it (see str())
  std::vector<std::pair<std::string, std::string>> declined;  // earlier entries: (name, why)
  std::string note;  // about the chosen entry: forced, or its timing
  const char* name() const { return impl ? impl->name : "none"; }
  // "direct_nchw (timed: 0.21 ms vs onednn 0.63 ms); declined: winograd: ..., packed: ..."
  std::string str() const;
};
// Which entry runs this convolution and why the earlier ones declined, honouring SPORE_CONV_IMPL.
// A timed entry's verdict comes from its first call; before it has run it counts as taking the
// conv (the note says so).
ConvChoice choose_conv(const ConvDesc& d);

// The kernels' path: the choice for ctx's convolution (cached per geometry; the first call times
// a timed entry on ctx's own buffers and logs the choice at debug level), then runs it. Throws
// NotImplemented naming each entry's reason when none takes the conv.
void run_conv(ConvProp prop, ops::KernelContext& ctx);

// SPORE_CONV_IMPL's value for this process, or for a scope (tests, benches); "" restores the list.
void set_conv_impl_override(const std::string& spec);
std::string conv_impl_override();
class ScopedConvImpl {
 public:
  explicit ScopedConvImpl(const std::string& spec) : old_(conv_impl_override()) {
    set_conv_impl_override(spec);
  }
  ~ScopedConvImpl() { set_conv_impl_override(old_); }
  ScopedConvImpl(const ScopedConvImpl&) = delete;
  ScopedConvImpl& operator=(const ScopedConvImpl&) = delete;

 private:
  std::string old_;
};

}  // namespace spore::cpu
