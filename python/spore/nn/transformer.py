"""MultiheadAttention and the transformer layers under MindSpore 2.x's names and arguments (which
follow PyTorch's), over the C++ cells of spore/nn/transformer.h. Masks: a boolean mask is True
where attention is NOT allowed; a float mask is added to the scores. Calls take the masks as
keywords, so these cells have their own __call__."""
from .. import _C
from ..common import dtype as mstype
from .cell import Cell
from .layer import LayerNorm, ReLU, _dt


def _activation_name(activation, cls):
    if isinstance(activation, str) and activation.lower() in ("relu", "gelu"):
        return activation.lower()
    if isinstance(activation, ReLU):
        return "relu"
    raise ValueError(f"For '{cls}', activation must be 'relu' or 'gelu' (the exact, erf GELU), got "
                     f"{activation!r}; other activations are not supported")


class MultiheadAttention(Cell):
    """nn.MultiheadAttention: parameters in_proj_weight (or q/k/v_proj_weight when kdim / vdim
    differ from embed_dim), in_proj_bias, bias_k / bias_v (add_bias_kv), out_proj.weight / .bias.
    Returns (output, weights); weights is None unless need_weights."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, has_bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, dtype=mstype.float32):
        super().__init__(_cpp=_C.MultiheadAttention(embed_dim, num_heads, float(dropout), has_bias, add_bias_kv,
                                                    add_zero_attn, kdim, vdim, batch_first, _dt(dtype)))
        self.embed_dim, self.num_heads, self.batch_first = embed_dim, num_heads, batch_first

    def __call__(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                 average_attn_weights=True):
        out, weights = self._cpp.call(query, key, value, key_padding_mask, bool(need_weights), attn_mask,
                                      bool(average_attn_weights))
        return out, weights


class TransformerEncoderLayer(Cell):
    """nn.TransformerEncoderLayer: sub-cells self_attn, linear1, dropout, linear2, norm1, norm2,
    dropout1, dropout2."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__(_cpp=_C.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, float(dropout), _activation_name(activation, "TransformerEncoderLayer"),
            float(layer_norm_eps), batch_first, norm_first, _dt(dtype)))
        self.d_model, self.nhead = d_model, nhead

    def __call__(self, src, src_mask=None, src_key_padding_mask=None):
        return self._cpp.call(src, src_mask, src_key_padding_mask)


class TransformerDecoderLayer(Cell):
    """nn.TransformerDecoderLayer: sub-cells self_attn, multihead_attn, linear1, dropout, linear2,
    norm1, norm2, norm3, dropout1, dropout2, dropout3."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__(_cpp=_C.TransformerDecoderLayer(
            d_model, nhead, dim_feedforward, float(dropout), _activation_name(activation, "TransformerDecoderLayer"),
            float(layer_norm_eps), batch_first, norm_first, _dt(dtype)))
        self.d_model, self.nhead = d_model, nhead

    def __call__(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                 memory_key_padding_mask=None):
        return self._cpp.call(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)


def _norm_cpp(norm, cls):
    if norm is None:
        return None
    if not isinstance(norm, LayerNorm):
        raise TypeError(f"For '{cls}', norm must be an nn.LayerNorm or None, got {type(norm).__name__}")
    return norm._cpp


class TransformerEncoder(Cell):
    """nn.TransformerEncoder: num_layers copies of encoder_layer (same initial weights) as
    layers.0 ..., then norm (optional)."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"For 'TransformerEncoder', encoder_layer must be an nn.TransformerEncoderLayer, got "
                            f"{type(encoder_layer).__name__}")
        super().__init__(_cpp=_C.TransformerEncoder(encoder_layer._cpp, num_layers,
                                                    _norm_cpp(norm, "TransformerEncoder")))
        self.num_layers = num_layers

    def __call__(self, src, mask=None, src_key_padding_mask=None):
        return self._cpp.call(src, mask, src_key_padding_mask)


class TransformerDecoder(Cell):
    """nn.TransformerDecoder: num_layers copies of decoder_layer (same initial weights) as
    layers.0 ..., then norm (optional)."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        if not isinstance(decoder_layer, TransformerDecoderLayer):
            raise TypeError(f"For 'TransformerDecoder', decoder_layer must be an nn.TransformerDecoderLayer, got "
                            f"{type(decoder_layer).__name__}")
        super().__init__(_cpp=_C.TransformerDecoder(decoder_layer._cpp, num_layers,
                                                    _norm_cpp(norm, "TransformerDecoder")))
        self.num_layers = num_layers

    def __call__(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                 memory_key_padding_mask=None):
        return self._cpp.call(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
