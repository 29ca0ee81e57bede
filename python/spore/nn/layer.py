"""The built-in layers under MindSpore's names and arguments; each is a thin Python Cell over the C++
layer (spore/nn/*.h), which holds the parameters ("weight", "bias", "gamma", ...)."""
from .. import _C
from ..common import dtype as mstype
from ..common.initializer import _to_cpp
from .cell import Cell
from .._args import refuse


def _dt(dtype):
    return None if dtype is None else _C.dtype_from_any(dtype)


class Dense(Cell):
    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None, has_bias=True,
                 activation=None, dtype=mstype.float32):
        act = activation
        if act is not None and not isinstance(act, str):
            act = type(act).__name__.lower()
        super().__init__(_cpp=_C.Dense(in_channels, out_channels, _to_cpp(weight_init), _to_cpp(bias_init),
                                       has_bias, act, _dt(dtype)))
        self.in_channels, self.out_channels, self.has_bias = in_channels, out_channels, has_bias

    def shard(self, in_strategy, out_strategy=None):
        """semi_auto_parallel: MindSpore's MatMul strategy for x @ weight^T, ((m, k), (n, k)); the
        weight and bias keep only this rank's piece (call before building the optimizer)."""
        self._cpp.shard([list(s) for s in in_strategy], [list(s) for s in (out_strategy or ())])
        return self

    def extend_repr(self):
        return self._cpp.extend_repr()


class Conv2d(Cell):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0, dilation=1,
                 group=1, has_bias=False, weight_init=None, bias_init=None, data_format="NCHW",
                 dtype=mstype.float32):
        if data_format != "NCHW":
            raise ValueError(f"For 'Conv2d', data_format must be 'NCHW' on CPU, got {data_format!r}")
        super().__init__(_cpp=_C.Conv2d(in_channels, out_channels, kernel_size, stride, pad_mode, padding, dilation,
                                        group, has_bias, _to_cpp(weight_init), _to_cpp(bias_init), _dt(dtype)))
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.pad_mode, self.padding, self.has_bias = stride, pad_mode, padding, has_bias


class Embedding(Cell):
    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal", dtype=mstype.int32,
                 padding_idx=None):
        refuse("nn.Embedding", "Spore's Embedding gathers rows (float32 table)", use_one_hot=(use_one_hot, False),
               dtype=(dtype, (mstype.int32, mstype.int64)))
        super().__init__(_cpp=_C.Embedding(vocab_size, embedding_size, _to_cpp(embedding_table), padding_idx, None))
        self.vocab_size, self.embedding_size = vocab_size, embedding_size


class Flatten(Cell):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(_cpp=_C.Flatten(start_dim, end_dim))


class Dropout(Cell):
    """MindSpore 2.x: p is the drop probability (keep_prob, the 1.x argument, is still accepted)."""

    def __init__(self, keep_prob=None, p=None, dtype=mstype.float32):
        refuse("nn.Dropout", "Spore's Dropout keeps the input's dtype", dtype=(dtype, (None, _C.DType.float32)))
        if p is None:
            p = 0.5 if keep_prob is None else 1.0 - keep_prob
        super().__init__(_cpp=_C.Dropout(float(p)))
        self.p = p


class Upsample(Cell):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        refuse("nn.Upsample", "Spore's interpolation uses half-pixel centres (align_corners=False)",
               align_corners=(align_corners, (None, False)), 
               recompute_scale_factor=(recompute_scale_factor, (None, False)))
        super().__init__(_cpp=_C.Upsample(size, scale_factor, mode))


def _activation(name, make):
    def __init__(self, *args, **kwargs):
        Cell.__init__(self, _cpp=make(*args, **kwargs))
    return type(name, (Cell,), {"__init__": __init__, "__doc__": f"nn.{name} (the C++ activation cell)."})


ReLU = _activation("ReLU", _C.ReLU)
ReLU6 = _activation("ReLU6", _C.ReLU6)
LeakyReLU = _activation("LeakyReLU", _C.LeakyReLU)
SiLU = _activation("SiLU", _C.SiLU)
Sigmoid = _activation("Sigmoid", _C.Sigmoid)
Tanh = _activation("Tanh", _C.Tanh)
GELU = _activation("GELU", _C.GELU)
Softmax = _activation("Softmax", _C.Softmax)
LogSoftmax = _activation("LogSoftmax", _C.LogSoftmax)


def get_activation(name, prim_name=None):
    refuse("get_activation", "the activation is named by `name`", prim_name=(prim_name, None))
    table = {"relu": ReLU, "relu6": ReLU6, "leakyrelu": LeakyReLU, "silu": SiLU, "swish": SiLU, "sigmoid": Sigmoid,
             "tanh": Tanh, "gelu": GELU, "softmax": Softmax, "logsoftmax": LogSoftmax}
    if name is None:
        return None
    if name.lower() not in table:
        raise KeyError(f"activation '{name}' is not supported; known: {', '.join(sorted(table))}")
    return table[name.lower()]()


class _BatchNorm(Cell):
    _make = None

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones", beta_init="zeros",
                 moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None, data_format="NCHW",
                 dtype=mstype.float32):
        refuse(type(self).__name__, "Spore's BatchNorm takes NCHW", data_format=(data_format, "NCHW"))
        super().__init__(_cpp=type(self)._make(num_features, eps, momentum, affine, _to_cpp(gamma_init),
                                               _to_cpp(beta_init), _to_cpp(moving_mean_init),
                                               _to_cpp(moving_var_init), use_batch_statistics, _dt(dtype)))
        self.num_features = num_features


class BatchNorm1d(_BatchNorm):
    _make = _C.BatchNorm1d


class BatchNorm2d(_BatchNorm):
    _make = _C.BatchNorm2d


class SyncBatchNorm(Cell):
    """MindSpore's nn.SyncBatchNorm: in training the batch statistics are those of the batch cut over
    the data-parallel ranks (all-reduced), so N ranks with B / N rows each normalise as one process with
    B rows. process_groups: None (every rank) or lists of ranks, one group each."""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init="ones", beta_init="zeros",
                 moving_mean_init="zeros", moving_var_init="ones", use_batch_statistics=None, process_groups=None,
                 dtype=mstype.float32):
        groups = None if process_groups is None else [list(g) for g in process_groups]
        super().__init__(_cpp=_C.SyncBatchNorm(num_features, eps, momentum, affine, _to_cpp(gamma_init),
                                               _to_cpp(beta_init), _to_cpp(moving_mean_init),
                                               _to_cpp(moving_var_init), use_batch_statistics, groups, _dt(dtype)))
        self.num_features = num_features


class LayerNorm(Cell):
    def __init__(self, normalized_shape, begin_norm_axis=-1, begin_params_axis=-1, gamma_init="ones",
                 beta_init="zeros", epsilon=1e-7, dtype=mstype.float32):
        super().__init__(_cpp=_C.LayerNorm(list(normalized_shape), begin_norm_axis, begin_params_axis, epsilon,
                                           _to_cpp(gamma_init), _to_cpp(beta_init), _dt(dtype)))


class MaxPool2d(Cell):
    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1, return_indices=False,
                 ceil_mode=False, data_format="NCHW"):
        refuse("nn.MaxPool2d", "Spore's pooling has no dilation or index output; use ops.argmax on the window yourself",
               dilation=(dilation, 1), return_indices=(return_indices, False), data_format=(data_format, "NCHW"))
        super().__init__(_cpp=_C.MaxPool2d(kernel_size, stride, pad_mode.lower(), padding, ceil_mode, True))


class AvgPool2d(Cell):
    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None, data_format="NCHW"):
        refuse("nn.AvgPool2d", "Spore divides by the window size (NCHW)", divisor_override=(divisor_override, None),
               data_format=(data_format, "NCHW"))
        super().__init__(_cpp=_C.AvgPool2d(kernel_size, stride, pad_mode.lower(), padding, ceil_mode,
                                           count_include_pad))


class AdaptiveAvgPool2d(Cell):
    def __init__(self, output_size=1):
        super().__init__(_cpp=_C.AdaptiveAvgPool2d(output_size))


class Identity(Cell):
    def construct(self, x):
        return x


class Conv1d(Cell):
    """nn.Conv1d: x (N, C, L); weight (out_channels, in_channels / group, kernel_size). padding: an
    int or (left, right), with pad_mode 'pad' only."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0, dilation=1,
                 group=1, has_bias=False, weight_init=None, bias_init=None, dtype=mstype.float32):
        super().__init__(_cpp=_C.Conv1d(in_channels, out_channels, kernel_size, stride, pad_mode, padding, dilation,
                                        group, has_bias, _to_cpp(weight_init), _to_cpp(bias_init), _dt(dtype)))
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.pad_mode, self.padding, self.has_bias = stride, pad_mode, padding, has_bias


class Conv2dTranspose(Cell):
    """nn.Conv2dTranspose: x (N, in_channels, H, W); weight (in_channels, out_channels / group, kh, kw).
    Output size: 'same' H * stride; 'valid' (H - 1) * stride + max(dilation * (k - 1) + 1, stride);
    'pad' (H - 1) * stride - top - bottom + dilation * (k - 1) + 1 + output_padding (output_padding
    needs pad_mode 'pad' and must be smaller than the stride)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same", padding=0,
                 output_padding=0, dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None,
                 dtype=mstype.float32):
        super().__init__(_cpp=_C.Conv2dTranspose(in_channels, out_channels, kernel_size, stride, pad_mode, padding,
                                                 output_padding, dilation, group, has_bias, _to_cpp(weight_init),
                                                 _to_cpp(bias_init), _dt(dtype)))
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.pad_mode, self.padding, self.has_bias = stride, pad_mode, padding, has_bias


class GroupNorm(Cell):
    """nn.GroupNorm: (N, C, *) normalised over groups of C / num_groups channels; gamma, beta (C,)."""

    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, gamma_init="ones", beta_init="zeros",
                 dtype=mstype.float32):
        super().__init__(_cpp=_C.GroupNorm(num_groups, num_channels, eps, affine, _to_cpp(gamma_init),
                                           _to_cpp(beta_init), _dt(dtype)))
        self.num_groups, self.num_channels = num_groups, num_channels


class Pad(Cell):
    """nn.Pad: paddings ((before, after), ...) for the input's dims (fewer pairs pad the last dims);
    mode 'CONSTANT' (zeros), 'REFLECT' or 'SYMMETRIC'."""

    def __init__(self, paddings, mode="CONSTANT"):
        if not isinstance(paddings, (tuple, list)):
            raise TypeError(f"For 'Pad', paddings must be a tuple of (before, after) pairs, got "
                            f"{type(paddings).__name__}")
        pairs = []
        for p in paddings:
            if not isinstance(p, (tuple, list)) or len(p) != 2 or not all(isinstance(v, int) for v in p):
                raise ValueError(f"For 'Pad', each entry of paddings must be a pair of ints (before, after), "
                                 f"got {p!r}")
            pairs.append((int(p[0]), int(p[1])))
        super().__init__(_cpp=_C.PadCell(pairs, mode))
        self.paddings, self.mode = paddings, mode
