// Attention and the transformer layers, with MindSpore 2.x's names, arguments and semantics (which
// follow PyTorch's): MultiheadAttention, TransformerEncoderLayer / TransformerEncoder,
// TransformerDecoderLayer / TransformerDecoder. Composites of existing ops (matmul, softmax,
// layer_norm, dropout), so autograd and Graph mode need nothing of their own; the attention itself
// is scaled_dot_product_attention (spore/ops.h).
//
// Layouts: (L, N, E) sequence first, or (N, L, E) with batch_first; an unbatched (L, E) is
// accepted too. Masks: a boolean mask is true where attention is NOT allowed (PyTorch's and
// MindSpore's nn.MultiheadAttention convention); a float mask is added to the scores.
//   attn_mask         (L, S) or (N * num_heads, L, S)
//   key_padding_mask  (N, S) (unbatched: (S))
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/nn/layers.h"
#include "spore/nn/norm.h"

namespace spore::nn {

// ---- MultiheadAttention ------------------------------------------------------------------------
// Parameters (PyTorch's / MindSpore's names): in_proj_weight (3E, E) when kdim == vdim == E, else
// q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim); in_proj_bias (3E) with
// has_bias; bias_k, bias_v (1, 1, E) with add_bias_kv; out_proj (a Dense E -> E).
struct MultiheadAttentionOptions {
  double dropout = 0.0;  // on the attention weights, in training
  bool has_bias = true;
  bool add_bias_kv = false;    // a learned key / value appended to the sequence
  bool add_zero_attn = false;  // a zero key / value appended (after the heads are split)
  int64_t kdim = 0;            // 0: embed_dim
  int64_t vdim = 0;            // 0: embed_dim
  bool batch_first = false;
  DType dtype = kFloat32;
};

// What a call takes besides (query, key, value); undefined masks are absent.
struct AttentionArgs {
  Tensor key_padding_mask{};
  bool need_weights = true;
  Tensor attn_mask{};
  bool average_attn_weights = true;  // weights (N, L, S) averaged over heads, else (N, H, L, S)
};

class MultiheadAttention : public Cell {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions opt = {});
  // (output, weights); weights is undefined unless need_weights.
  std::pair<Tensor, Tensor> call(const Tensor& query, const Tensor& key, const Tensor& value,
                                 const AttentionArgs& args = {});
  Tensor construct(const Tensor& x) override;  // self-attention, output only
  // (query, key, value[, key_padding_mask[, attn_mask]]) -> (output, weights); an undefined
  // tensor stands for an absent mask.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;
  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  const MultiheadAttentionOptions& options() const { return opt_; }

 private:
  int64_t embed_dim_, num_heads_, kdim_, vdim_;
  MultiheadAttentionOptions opt_;
  std::shared_ptr<Dense> out_proj_;
};

// ---- the transformer layers --------------------------------------------------------------------
struct TransformerLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" | "gelu" (exact, erf)
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  // pre-norm: x + f(norm(x)); else post-norm: norm(x + f(x))
  DType dtype = kFloat32;
};

// Sub-cells: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
class TransformerEncoderLayer : public Cell {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions opt = {});
  Tensor call(const Tensor& src, const Tensor& src_mask = {},
              const Tensor& src_key_padding_mask = {});
  Tensor construct(const Tensor& src) override { return call(src); }
  // (src[, src_mask[, src_key_padding_mask]]); undefined tensors are absent masks.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;
  int64_t d_model() const { return d_model_; }
  int64_t nhead() const { return nhead_; }
  const TransformerLayerOptions& options() const { return opt_; }

 private:
  Tensor feed_forward(const Tensor& x);
  int64_t d_model_, nhead_;
  TransformerLayerOptions opt_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Dense> linear1_, linear2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
};

// Sub-cells: self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1,
// dropout2, dropout3.
class TransformerDecoderLayer : public Cell {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions opt = {});
  Tensor call(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
              const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
              const Tensor& memory_key_padding_mask = {});
  Tensor construct(const Tensor& tgt, const Tensor& memory) override { return call(tgt, memory); }
  // (tgt, memory[, tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]])
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;
  int64_t d_model() const { return d_model_; }
  int64_t nhead() const { return nhead_; }
  const TransformerLayerOptions& options() const { return opt_; }

 private:
  Tensor feed_forward(const Tensor& x);
  int64_t d_model_, nhead_;
  TransformerLayerOptions opt_;
  std::shared_ptr<MultiheadAttention> self_attn_, multihead_attn_;
  std::shared_ptr<Dense> linear1_, linear2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_, norm3_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_, dropout3_;
};

// num_layers copies of `layer` (same configuration and same initial weights, as MindSpore's and
// PyTorch's deep copies; `layer` itself is not part of the stack) as sub-cells "layers.0", ...,
// then `norm` (optional) as "norm".
class TransformerEncoder : public Cell {
 public:
  TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor call(const Tensor& src, const Tensor& mask = {}, const Tensor& src_key_padding_mask = {});
  Tensor construct(const Tensor& src) override { return call(src); }
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

class TransformerDecoder : public Cell {
 public:
  TransformerDecoder(const TransformerDecoderLayer& layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor call(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
              const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
              const Tensor& memory_key_padding_mask = {});
  Tensor construct(const Tensor& tgt, const Tensor& memory) override { return call(tgt, memory); }
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;

 private:
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers_;
  std::shared_ptr<LayerNorm> norm_;
};

}  // namespace spore::nn
