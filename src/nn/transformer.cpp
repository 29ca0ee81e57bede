// MultiheadAttention and the transformer layers (spore/nn/transformer.h). The math follows
// PyTorch's multi_head_attention_forward, written batch-first inside: project, split the heads,
// turn the masks into one additive float mask (N, H or 1, L, S), attend
// (scaled_dot_product_attention), merge the heads, project out.
#include "spore/nn/transformer.h"

#include <cmath>
#include <limits>

#include "nn/util.h"
#include "spore/autograd.h"
#include "spore/nn/container.h"
#include "spore/ops.h"

namespace spore::nn {

using detail::fmt;
using detail::fmt_bool;

namespace {

// A boolean (or uint8) mask, true = excluded, as an additive float mask; a float mask as is.
Tensor additive_mask(const Tensor& m, DType dtype, const char* what) {
  if (m.dtype() == kBool || m.dtype() == kUInt8) {
    const Tensor b = m.dtype() == kBool ? m : not_equal(m, zeros_like(m));
    return where(b, full({}, -std::numeric_limits<double>::infinity(), dtype, m.device()),
                 zeros({}, dtype, m.device()));
  }
  SPORE_CHECK_TYPE(is_floating(m.dtype()), "[MultiheadAttention] ", what,
                   " must be bool (true = not attended) or float (added to the scores), got ",
                   dtype_name(m.dtype()));
  return m.to(dtype);
}

Tensor optional_input(const std::vector<Tensor>& in, size_t i) {
  return i < in.size() ? in[i] : Tensor();
}

}  // namespace

// ---- MultiheadAttention ------------------------------------------------------------------------
MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                       MultiheadAttentionOptions opt)
    : embed_dim_(embed_dim),
      num_heads_(num_heads),
      kdim_(opt.kdim > 0 ? opt.kdim : embed_dim),
      vdim_(opt.vdim > 0 ? opt.vdim : embed_dim),
      opt_(opt) {
  set_cls_name("MultiheadAttention");
  SPORE_CHECK(embed_dim_ > 0 && num_heads_ > 0 && embed_dim_ % num_heads_ == 0,
              "[MultiheadAttention] embed_dim (", embed_dim_,
              ") must be a positive multiple of num_heads (", num_heads_, ")");
  SPORE_CHECK(opt.kdim >= 0 && opt.vdim >= 0,
              "[MultiheadAttention] kdim and vdim must be "
              "positive (or 0 / None for embed_dim), got ",
              opt.kdim, " and ", opt.vdim);
  SPORE_CHECK(opt.dropout >= 0 && opt.dropout < 1,
              "[MultiheadAttention] dropout must be in [0, 1), got ", fmt(opt.dropout));
  const int64_t E = embed_dim_;
  if (kdim_ == E && vdim_ == E) {
    register_parameter("in_proj_weight", XavierUniform().make({3 * E, E}, opt.dtype));
  } else {
    register_parameter("q_proj_weight", XavierUniform().make({E, E}, opt.dtype));
    register_parameter("k_proj_weight", XavierUniform().make({E, kdim_}, opt.dtype));
    register_parameter("v_proj_weight", XavierUniform().make({E, vdim_}, opt.dtype));
  }
  if (opt.has_bias) register_parameter("in_proj_bias", zeros({3 * E}, opt.dtype));
  if (opt.add_bias_kv) {
    register_parameter("bias_k", XavierNormal().make({1, 1, E}, opt.dtype));
    register_parameter("bias_v", XavierNormal().make({1, 1, E}, opt.dtype));
  }
  out_proj_ = std::make_shared<Dense>(
      E, E,
      DenseOptions{
          .has_bias = opt.has_bias, .bias_init = Initializer("zeros"), .dtype = opt.dtype});
  register_cell("out_proj", out_proj_);
}

std::pair<Tensor, Tensor> MultiheadAttention::call(const Tensor& query, const Tensor& key,
                                                   const Tensor& value, const AttentionArgs& args) {
  CallScopes scopes(*this);
  const int64_t E = embed_dim_, H = num_heads_, hd = E / H;
  const bool batched = query.dim() == 3;
  SPORE_CHECK((query.dim() == 3 || query.dim() == 2) && key.dim() == query.dim() &&
                  value.dim() == query.dim(),
              "[MultiheadAttention] expected query, key and value all batched (3-d) or all "
              "unbatched (2-d), got shapes ",
              shape_str(query.shape()), ", ", shape_str(key.shape()), " and ",
              shape_str(value.shape()));
  // Batch-first inside: (N, L, E).
  auto bf = [&](const Tensor& t) {
    return !batched ? t.unsqueeze(0) : opt_.batch_first ? t : t.transpose(0, 1);
  };
  const Tensor q_in = bf(query), k_in = bf(key), v_in = bf(value);
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1);
  const std::string layout = !batched ? "(L, E)" : opt_.batch_first ? "(N, L, E)" : "(L, N, E)";
  SPORE_CHECK(q_in.size(2) == E && k_in.size(2) == kdim_ && v_in.size(2) == vdim_,
              "[MultiheadAttention] expected query ", layout, " with E = embed_dim = ", E,
              ", key with ", kdim_, " features (kdim) and value with ", vdim_,
              " (vdim), got shapes ", shape_str(query.shape()), ", ", shape_str(key.shape()),
              " and ", shape_str(value.shape()));
  SPORE_CHECK(k_in.size(0) == N && v_in.size(0) == N && v_in.size(1) == S,
              "[MultiheadAttention] query, key and value must share the batch size and key / "
              "value the sequence length, got shapes ",
              shape_str(query.shape()), ", ", shape_str(key.shape()), " and ",
              shape_str(value.shape()), " (layout ", layout, ")");

  // Projections: x @ W^T + b, W / b the rows of in_proj_weight / in_proj_bias for q, k, v.
  auto project = [&](const Tensor& x, int64_t i, const char* separate) {
    const Tensor w = kdim_ == E && vdim_ == E
                         ? parameter("in_proj_weight").slice(0, i * E, (i + 1) * E)
                         : parameter(separate);
    Tensor y = matmul(x, w.t());
    if (opt_.has_bias) y = y + parameter("in_proj_bias").slice(0, i * E, (i + 1) * E);
    return y;
  };
  Tensor q = project(q_in, 0, "q_proj_weight"), k = project(k_in, 1, "k_proj_weight"),
         v = project(v_in, 2, "v_proj_weight");  // (N, L or S, E)

  // The masks as one additive float mask broadcasting to (N, H, L, S).
  Tensor mask;
  if (args.attn_mask.defined()) {
    const Tensor& m = args.attn_mask;
    if (m.dim() == 2) {
      SPORE_CHECK(m.size(0) == L && m.size(1) == S,
                  "[MultiheadAttention] a 2-d attn_mask must be "
                  "(L, S) = (",
                  L, ", ", S, "), got shape ", shape_str(m.shape()));
      mask = additive_mask(m, q.dtype(), "attn_mask").reshape({1, 1, L, S});
    } else {
      SPORE_CHECK(m.dim() == 3 && m.size(0) == N * H && m.size(1) == L && m.size(2) == S,
                  "[MultiheadAttention] attn_mask must be (L, S) = (", L, ", ", S,
                  ") or (N * num_heads, L, S) = (", N * H, ", ", L, ", ", S, "), got shape ",
                  shape_str(m.shape()));
      mask = additive_mask(m, q.dtype(), "attn_mask").reshape({N, H, L, S});
    }
  }
  if (args.key_padding_mask.defined()) {
    const Tensor& m = args.key_padding_mask;
    const bool ok = batched ? (m.dim() == 2 && m.size(0) == N && m.size(1) == S)
                            : (m.dim() == 1 && m.size(0) == S);
    SPORE_CHECK(ok, "[MultiheadAttention] key_padding_mask must be ",
                batched ? "(N, S) = (" + std::to_string(N) + ", " + std::to_string(S) + ")"
                        : "(S) = (" + std::to_string(S) + ")",
                ", got shape ", shape_str(m.shape()));
    const Tensor kpm = additive_mask(m, q.dtype(), "key_padding_mask").reshape({N, 1, 1, S});
    mask = mask.defined() ? mask + kpm : kpm;
  }
  // add_bias_kv: a learned key / value appended to the sequence (the masks admit it).
  if (opt_.add_bias_kv) {
    k = concat({k, parameter("bias_k").expand({N, 1, E})}, 1);
    v = concat({v, parameter("bias_v").expand({N, 1, E})}, 1);
    if (mask.defined()) mask = pad(mask, {0, 1});
  }
  auto heads = [&](const Tensor& t) {  // (N, len, E) -> (N, H, len, hd)
    return t.reshape({N, t.size(1), H, hd}).permute({0, 2, 1, 3});
  };
  Tensor qh = heads(q), kh = heads(k), vh = heads(v);
  if (opt_.add_zero_attn) {  // a zero key / value per head
    kh = concat({kh, zeros({N, H, 1, hd}, kh.dtype(), kh.device())}, 2);
    vh = concat({vh, zeros({N, H, 1, hd}, vh.dtype(), vh.device())}, 2);
    if (mask.defined()) mask = pad(mask, {0, 1});
  }
  const double p = training() ? opt_.dropout : 0.0;
  auto [ctx, weights] = scaled_dot_product_attention(qh, kh, vh, mask, p);  // (N, H, L, hd)
  Tensor out = (*out_proj_)(ctx.permute({0, 2, 1, 3}).reshape({N, L, E}));
  out = !batched ? out.squeeze(0) : opt_.batch_first ? out : out.transpose(0, 1);
  if (!args.need_weights) return {out, Tensor()};
  if (args.average_attn_weights) weights = mean(weights, {1});  // (N, L, S)
  if (!batched) weights = weights.squeeze(0);
  return {out, weights};
}

Tensor MultiheadAttention::construct(const Tensor& x) {
  return call(x, x, x, {.need_weights = false}).first;
}

std::vector<Tensor> MultiheadAttention::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() >= 3 && inputs.size() <= 5,
              "[MultiheadAttention] forward takes (query, key, value[, key_padding_mask[, "
              "attn_mask]]), got ",
              inputs.size(), " inputs");
  auto [out, w] =
      call(inputs[0], inputs[1], inputs[2],
           {.key_padding_mask = optional_input(inputs, 3), .attn_mask = optional_input(inputs, 4)});
  return {out, w};
}

std::string MultiheadAttention::extend_repr() const {
  return "embed_dim=" + std::to_string(embed_dim_) + ", num_heads=" + std::to_string(num_heads_) +
         ", dropout=" + fmt(opt_.dropout) + ", has_bias=" + fmt_bool(opt_.has_bias) +
         ", add_bias_kv=" + fmt_bool(opt_.add_bias_kv) +
         ", add_zero_attn=" + fmt_bool(opt_.add_zero_attn) + ", kdim=" + std::to_string(kdim_) +
         ", vdim=" + std::to_string(vdim_) + ", batch_first=" + fmt_bool(opt_.batch_first);
}

// ---- shared by the layers ----------------------------------------------------------------------
namespace {

void check_layer_options(const char* name, int64_t d_model, int64_t nhead,
                         const TransformerLayerOptions& o) {
  SPORE_CHECK(d_model > 0 && nhead > 0 && d_model % nhead == 0, "[", name, "] d_model (", d_model,
              ") must be a positive multiple of nhead (", nhead, ")");
  SPORE_CHECK(o.dim_feedforward > 0, "[", name, "] dim_feedforward must be positive, got ",
              o.dim_feedforward);
  SPORE_CHECK(o.activation == "relu" || o.activation == "gelu", "[", name,
              "] activation must be 'relu' or 'gelu', got '", o.activation, "'");
  SPORE_CHECK(o.layer_norm_eps > 0, "[", name, "] layer_norm_eps must be positive, got ",
              fmt(o.layer_norm_eps));
}

std::shared_ptr<MultiheadAttention> make_attention(int64_t d_model, int64_t nhead,
                                                   const TransformerLayerOptions& o) {
  return std::make_shared<MultiheadAttention>(
      d_model, nhead,
      MultiheadAttentionOptions{
          .dropout = o.dropout, .batch_first = o.batch_first, .dtype = o.dtype});
}
std::shared_ptr<LayerNorm> make_norm(int64_t d_model, const TransformerLayerOptions& o) {
  return std::make_shared<LayerNorm>(
      Shape{d_model}, LayerNormOptions{.epsilon = o.layer_norm_eps, .dtype = o.dtype});
}

std::string layer_repr(int64_t d_model, int64_t nhead, const TransformerLayerOptions& o) {
  return "d_model=" + std::to_string(d_model) + ", nhead=" + std::to_string(nhead) +
         ", dim_feedforward=" + std::to_string(o.dim_feedforward) + ", dropout=" + fmt(o.dropout) +
         ", activation=" + o.activation + ", layer_norm_eps=" + fmt(o.layer_norm_eps) +
         ", batch_first=" + fmt_bool(o.batch_first) + ", norm_first=" + fmt_bool(o.norm_first);
}

// Copies src's parameter values into dst (the same structure): the deep copy of a layer.
void copy_parameters(const Cell& src, Cell& dst) {
  NoGradGuard no_grad;
  const auto from = src.named_parameters(), to = dst.named_parameters();
  SPORE_ASSERT(from.size() == to.size(), "copy_parameters: different structures");
  for (size_t i = 0; i < from.size(); ++i) {
    SPORE_ASSERT(from[i].first == to[i].first, "copy_parameters: ", from[i].first, " vs ",
                 to[i].first);
    assign(to[i].second, from[i].second);
  }
}

}  // namespace

// ---- TransformerEncoderLayer -------------------------------------------------------------------
TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 TransformerLayerOptions opt)
    : d_model_(d_model), nhead_(nhead), opt_(std::move(opt)) {
  set_cls_name("TransformerEncoderLayer");
  check_layer_options("TransformerEncoderLayer", d_model, nhead, opt_);
  self_attn_ = make_attention(d_model, nhead, opt_);
  linear1_ =
      std::make_shared<Dense>(d_model, opt_.dim_feedforward, DenseOptions{.dtype = opt_.dtype});
  dropout_ = std::make_shared<Dropout>(opt_.dropout);
  linear2_ =
      std::make_shared<Dense>(opt_.dim_feedforward, d_model, DenseOptions{.dtype = opt_.dtype});
  norm1_ = make_norm(d_model, opt_);
  norm2_ = make_norm(d_model, opt_);
  dropout1_ = std::make_shared<Dropout>(opt_.dropout);
  dropout2_ = std::make_shared<Dropout>(opt_.dropout);
  register_cell("self_attn", self_attn_);
  register_cell("linear1", linear1_);
  register_cell("dropout", dropout_);
  register_cell("linear2", linear2_);
  register_cell("norm1", norm1_);
  register_cell("norm2", norm2_);
  register_cell("dropout1", dropout1_);
  register_cell("dropout2", dropout2_);
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  const Tensor h = (*linear1_)(x);
  return (*dropout2_)((*linear2_)((*dropout_)(opt_.activation == "relu" ? relu(h) : gelu(h))));
}

Tensor TransformerEncoderLayer::call(const Tensor& src, const Tensor& src_mask,
                                     const Tensor& src_key_padding_mask) {
  CallScopes scopes(*this);
  auto sa = [&](const Tensor& x) {
    return (*dropout1_)(self_attn_
                            ->call(x, x, x,
                                   {.key_padding_mask = src_key_padding_mask,
                                    .need_weights = false,
                                    .attn_mask = src_mask})
                            .first);
  };
  Tensor x = src;
  if (opt_.norm_first) {
    x = x + sa((*norm1_)(x));
    return x + feed_forward((*norm2_)(x));
  }
  x = (*norm1_)(x + sa(x));
  return (*norm2_)(x + feed_forward(x));
}

std::vector<Tensor> TransformerEncoderLayer::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(!inputs.empty() && inputs.size() <= 3,
              "[TransformerEncoderLayer] forward takes "
              "(src[, src_mask[, src_key_padding_mask]]), got ",
              inputs.size(), " inputs");
  return {call(inputs[0], optional_input(inputs, 1), optional_input(inputs, 2))};
}

std::string TransformerEncoderLayer::extend_repr() const {
  return layer_repr(d_model_, nhead_, opt_);
}

// ---- TransformerDecoderLayer -------------------------------------------------------------------
TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead,
                                                 TransformerLayerOptions opt)
    : d_model_(d_model), nhead_(nhead), opt_(std::move(opt)) {
  set_cls_name("TransformerDecoderLayer");
  check_layer_options("TransformerDecoderLayer", d_model, nhead, opt_);
  self_attn_ = make_attention(d_model, nhead, opt_);
  multihead_attn_ = make_attention(d_model, nhead, opt_);
  linear1_ =
      std::make_shared<Dense>(d_model, opt_.dim_feedforward, DenseOptions{.dtype = opt_.dtype});
  dropout_ = std::make_shared<Dropout>(opt_.dropout);
  linear2_ =
      std::make_shared<Dense>(opt_.dim_feedforward, d_model, DenseOptions{.dtype = opt_.dtype});
  norm1_ = make_norm(d_model, opt_);
  norm2_ = make_norm(d_model, opt_);
  norm3_ = make_norm(d_model, opt_);
  dropout1_ = std::make_shared<Dropout>(opt_.dropout);
  dropout2_ = std::make_shared<Dropout>(opt_.dropout);
  dropout3_ = std::make_shared<Dropout>(opt_.dropout);
  register_cell("self_attn", self_attn_);
  register_cell("multihead_attn", multihead_attn_);
  register_cell("linear1", linear1_);
  register_cell("dropout", dropout_);
  register_cell("linear2", linear2_);
  register_cell("norm1", norm1_);
  register_cell("norm2", norm2_);
  register_cell("norm3", norm3_);
  register_cell("dropout1", dropout1_);
  register_cell("dropout2", dropout2_);
  register_cell("dropout3", dropout3_);
}

Tensor TransformerDecoderLayer::feed_forward(const Tensor& x) {
  const Tensor h = (*linear1_)(x);
  return (*dropout3_)((*linear2_)((*dropout_)(opt_.activation == "relu" ? relu(h) : gelu(h))));
}

Tensor TransformerDecoderLayer::call(const Tensor& tgt, const Tensor& memory,
                                     const Tensor& tgt_mask, const Tensor& memory_mask,
                                     const Tensor& tgt_key_padding_mask,
                                     const Tensor& memory_key_padding_mask) {
  CallScopes scopes(*this);
  auto sa = [&](const Tensor& x) {
    return (*dropout1_)(self_attn_
                            ->call(x, x, x,
                                   {.key_padding_mask = tgt_key_padding_mask,
                                    .need_weights = false,
                                    .attn_mask = tgt_mask})
                            .first);
  };
  auto mha = [&](const Tensor& x) {
    return (*dropout2_)(multihead_attn_
                            ->call(x, memory, memory,
                                   {.key_padding_mask = memory_key_padding_mask,
                                    .need_weights = false,
                                    .attn_mask = memory_mask})
                            .first);
  };
  Tensor x = tgt;
  if (opt_.norm_first) {
    x = x + sa((*norm1_)(x));
    x = x + mha((*norm2_)(x));
    return x + feed_forward((*norm3_)(x));
  }
  x = (*norm1_)(x + sa(x));
  x = (*norm2_)(x + mha(x));
  return (*norm3_)(x + feed_forward(x));
}

std::vector<Tensor> TransformerDecoderLayer::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() >= 2 && inputs.size() <= 6,
              "[TransformerDecoderLayer] forward takes "
              "(tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, "
              "memory_key_padding_mask]]]]), got ",
              inputs.size(), " inputs");
  return {call(inputs[0], inputs[1], optional_input(inputs, 2), optional_input(inputs, 3),
               optional_input(inputs, 4), optional_input(inputs, 5))};
}

std::string TransformerDecoderLayer::extend_repr() const {
  return layer_repr(d_model_, nhead_, opt_);
}

// ---- the stacks --------------------------------------------------------------------------------
namespace {
// num_layers fresh layers with `layer`'s options, each starting from a copy of its weights.
template <class Layer>
std::vector<std::shared_ptr<Layer>> stack_copies(const Layer& layer, int64_t num_layers,
                                                 const char* owner) {
  SPORE_CHECK(num_layers >= 1, "[", owner, "] num_layers must be >= 1, got ", num_layers);
  std::vector<std::shared_ptr<Layer>> layers;
  for (int64_t i = 0; i < num_layers; ++i) {
    layers.push_back(std::make_shared<Layer>(layer.d_model(), layer.nhead(), layer.options()));
    copy_parameters(layer, *layers.back());
  }
  return layers;
}
}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : layers_(stack_copies(layer, num_layers, "TransformerEncoder")), norm_(std::move(norm)) {
  set_cls_name("TransformerEncoder");
  auto list = std::make_shared<CellList>();
  for (const auto& l : layers_) list->append(l);
  register_cell("layers", list);
  if (norm_) register_cell("norm", norm_);
}

Tensor TransformerEncoder::call(const Tensor& src, const Tensor& mask,
                                const Tensor& src_key_padding_mask) {
  CallScopes scopes(*this);
  Tensor x = src;
  for (auto& l : layers_) x = l->call(x, mask, src_key_padding_mask);
  return norm_ ? (*norm_)(x) : x;
}

std::vector<Tensor> TransformerEncoder::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(!inputs.empty() && inputs.size() <= 3,
              "[TransformerEncoder] forward takes "
              "(src[, mask[, src_key_padding_mask]]), got ",
              inputs.size(), " inputs");
  return {call(inputs[0], optional_input(inputs, 1), optional_input(inputs, 2))};
}

std::string TransformerEncoder::extend_repr() const {
  return "num_layers=" + std::to_string(layers_.size());
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : layers_(stack_copies(layer, num_layers, "TransformerDecoder")), norm_(std::move(norm)) {
  set_cls_name("TransformerDecoder");
  auto list = std::make_shared<CellList>();
  for (const auto& l : layers_) list->append(l);
  register_cell("layers", list);
  if (norm_) register_cell("norm", norm_);
}

Tensor TransformerDecoder::call(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                const Tensor& memory_key_padding_mask) {
  CallScopes scopes(*this);
  Tensor x = tgt;
  for (auto& l : layers_)
    x = l->call(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask);
  return norm_ ? (*norm_)(x) : x;
}

std::vector<Tensor> TransformerDecoder::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() >= 2 && inputs.size() <= 6,
              "[TransformerDecoder] forward takes "
              "(tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, "
              "memory_key_padding_mask]]]]), got ",
              inputs.size(), " inputs");
  return {call(inputs[0], inputs[1], optional_input(inputs, 2), optional_input(inputs, 3),
               optional_input(inputs, 4), optional_input(inputs, 5))};
}

std::string TransformerDecoder::extend_repr() const {
  return "num_layers=" + std::to_string(layers_.size());
}

}  // namespace spore::nn
