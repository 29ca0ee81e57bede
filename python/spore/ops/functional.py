"""The functional API (mindspore.ops.*): each function calls one C++ op (spore/ops.h) with
MindSpore's argument names and defaults. Python numbers mix with tensors as MindSpore's scalars
do (they take the tensor's dtype)."""
import numpy as np

from .. import _C
from ..common.tensor import Tensor
from .._args import refuse


def _axes(axis):
    if axis is None or axis == ():
        return None
    return [axis] if isinstance(axis, int) else list(axis)


def _t(x):
    return x if isinstance(x, Tensor) else Tensor(x)


# ---- elementwise ---------------------------------------------------------------------------------
neg = _C.neg
negative = _C.neg
abs = _C.abs
absolute = _C.abs
exp = _C.exp
log = _C.log
sqrt = _C.sqrt
rsqrt = _C.rsqrt
sin = _C.sin
cos = _C.cos
tanh = _C.tanh
sigmoid = _C.sigmoid
relu = _C.relu
relu6 = _C.relu6
silu = _C.silu
floor = _C.floor
ceil = _C.ceil
round = _C.round
sign = _C.sign
erf = _C.erf
square = _C.square
reciprocal = _C.reciprocal
logical_not = _C.logical_not
add = _C.add
sub = _C.sub
mul = _C.mul
div = _C.div
pow = _C.pow
maximum = _C.maximum
minimum = _C.minimum
equal = _C.equal
not_equal = _C.not_equal
ne = _C.not_equal
less = _C.less
lt = _C.less
less_equal = _C.less_equal
le = _C.less_equal
greater = _C.greater
gt = _C.greater
greater_equal = _C.greater_equal
ge = _C.greater_equal
logical_and = _C.logical_and
logical_or = _C.logical_or
logical_xor = _C.logical_xor
matmul = _C.matmul
stop_gradient = _C.stop_gradient


def leaky_relu(input, alpha=0.2):
    return _C.leaky_relu(input, alpha)


def gelu(input_x, approximate="none"):
    return _C.gelu(input_x, approximate == "tanh" or approximate is True)


def softplus(input, beta=1, threshold=20):
    return _C.softplus(input, beta, threshold)


def clamp(input, min=None, max=None):
    return _C.clamp(input, None if min is None else float(min), None if max is None else float(max))


clip = clamp


def clip_by_value(x, clip_value_min=None, clip_value_max=None):
    return clamp(x, clip_value_min, clip_value_max)


def _norm_of_all(tensors, norm_type):
    """The norm of all `tensors` as if concatenated (float32), as one scalar Tensor."""
    parts = [t.astype(_C.DType.float32) if t.dtype != _C.DType.float32 else t for t in tensors]
    if norm_type == float("inf"):
        return _C.amax(_C.stack([_C.amax(_C.abs(t), None, False) for t in parts], 0), None, False)
    p = float(norm_type)
    if p == 2.0:
        return _C.sqrt(_C.sum(_C.stack([_C.sum(_C.square(t), None, False) for t in parts], 0), None, False))
    total = _C.sum(_C.stack([_C.sum(_C.pow(_C.abs(t), p), None, False) for t in parts], 0), None, False)
    return _C.pow(total, 1.0 / p)


def _tensor_list(x, fn):
    if isinstance(x, Tensor):
        return [x], True
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, Tensor) for t in x):
        return list(x), False
    raise TypeError(f"For '{fn}', x must be a Tensor or a non-empty list/tuple of Tensors (the gradients), "
                    f"got {type(x).__name__}" + ("" if not isinstance(x, (list, tuple)) else
                                                  f" of {[type(t).__name__ for t in x][:4]}"))


def clip_by_norm(x, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """MindSpore 2.x ops.clip_by_norm (torch.nn.utils.clip_grad_norm_'s rule): the norm of all of
    `x` together; when it exceeds max_norm every tensor is scaled by max_norm / (norm + 1e-6).
    Returns a Tensor for a Tensor, a tuple for a list/tuple."""
    ts, single = _tensor_list(x, "ops.clip_by_norm")
    if not float(max_norm) > 0:
        raise ValueError(f"For 'ops.clip_by_norm', max_norm must be > 0, got {max_norm}")
    total = _norm_of_all(ts, norm_type)
    if error_if_nonfinite and not np.isfinite(value := float(total.asnumpy())):
        raise RuntimeError(f"For 'ops.clip_by_norm', the total norm of order {norm_type} is "
                           f"{value}; set error_if_nonfinite=False to clip anyway")
    coef = _C.clamp(_C.div(Tensor(np.float32(max_norm)), _C.add(total, Tensor(np.float32(1e-6)))), None, 1.0)
    out = [_C.mul(t, coef.astype(t.dtype)) for t in ts]
    return out[0] if single else tuple(out)


def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    """MindSpore's ops.clip_by_global_norm: x_i * clip_norm / max(global_norm, clip_norm), where the
    global norm is the 2-norm of all of x (or `use_norm`, when given). Returns a tuple."""
    if isinstance(x, Tensor):
        raise TypeError("For 'ops.clip_by_global_norm', x must be a tuple or list of Tensors (the "
                        "gradients), got one Tensor; use ops.clip_by_norm for a single Tensor")
    ts, _ = _tensor_list(x, "ops.clip_by_global_norm")
    if not float(clip_norm) > 0:
        raise ValueError(f"For 'ops.clip_by_global_norm', clip_norm must be > 0, got {clip_norm}")
    if use_norm is None:  # the optimizer's own clip (optim::clip_by_global_norm), the same formula
        return tuple(_C.clip_by_global_norm(ts, float(clip_norm)))
    g = _t(use_norm).astype(_C.DType.float32)
    c = Tensor(np.float32(clip_norm))
    coef = _C.div(c, _C.maximum(g, c))
    return tuple(_C.mul(t, coef.astype(t.dtype)) for t in ts)


def cast(input, dtype):
    return _C.cast(input, dtype)


def where(condition, x, y):
    return _C.where(condition, x, y)


def select(cond, x, y):
    return _C.where(cond, x, y)


def isfinite(x):
    return _C.logical_and(_C.equal(x, x), _C.less(_C.abs(x), float("inf")))


def isnan(x):
    return _C.not_equal(x, x)


def square_sum(x):
    return _C.sum(_C.square(x), None, False)


def addn(x):
    out = x[0]
    for t in x[1:]:
        out = out + t
    return out


def true_divide(x, y):
    return x / y


def floor_divide(x, y):
    return x // y


def remainder(x, y):
    return x % y


# ---- reductions ----------------------------------------------------------------------------------
def sum(input, dim=None, keepdim=False, *, dtype=None):
    return _C.sum(input if dtype is None else input.astype(dtype), _axes(dim), keepdim)


def mean(input, axis=None, keep_dims=False):
    return _C.mean(input, _axes(axis), keep_dims)


def prod(input, axis=None, keep_dims=False):
    return _C.prod(input, _axes(axis), keep_dims)


def amax(input, axis=None, keepdims=False):
    return _C.amax(input, _axes(axis), keepdims)


def amin(input, axis=None, keepdims=False):
    return _C.amin(input, _axes(axis), keepdims)


def max(input, axis=None, keepdims=False, *, initial=None, where=None):
    """MindSpore 2.x: (values, indices) along an axis; the maximum of all elements without one."""
    refuse("ops.max", "reduce first and combine with ops.maximum / ops.minimum / ops.where",
           initial=(initial, None), where=(where, None))
    if axis is None:
        return _C.amax(input, None, keepdims)
    return _C.amax(input, [axis], keepdims), _C.argmax(input, axis, keepdims)


def min(input, axis=None, keepdims=False, *, initial=None, where=None):
    refuse("ops.min", "reduce first and combine with ops.maximum / ops.minimum / ops.where",
           initial=(initial, None), where=(where, None))
    if axis is None:
        return _C.amin(input, None, keepdims)
    return _C.amin(input, [axis], keepdims), _C.argmin(input, axis, keepdims)


def argmax(input, dim=None, keepdim=False):
    if dim is None:
        return _C.argmax(input.reshape(-1), 0, False)
    return _C.argmax(input, dim, keepdim)


def argmin(input, axis=None, keepdims=False):
    if axis is None:
        return _C.argmin(input.reshape(-1), 0, False)
    return _C.argmin(input, axis, keepdims)


def std(input, axis=None, ddof=0, keepdims=False):
    return _C.std(input, _axes(axis), int(ddof), keepdims)


def var(input, axis=None, ddof=0, keepdims=False):
    return _C.var(input, _axes(axis), int(ddof), keepdims)


def logsumexp(input, axis, keep_dims=False):
    return _C.logsumexp(input, _axes(axis), keep_dims)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """MindSpore's ops.norm: ord None / "fro" (the 2-norm of the elements over dim), or, for a
    vector norm (dim an int, or a 1-D input), any number p (inf, -inf, 0 too). Matrix norms with
    another ord are refused. dtype: A is cast to it first."""
    if dtype is not None:
        A = A.astype(dtype)
    if ord is None or (isinstance(ord, str) and ord == "fro"):
        return _C.sqrt(_C.sum(_C.square(A), _axes(dim), keepdim))
    vector = isinstance(dim, int) or (dim is None and A.ndim == 1) or (isinstance(dim, (tuple, list)) and len(dim) == 1)
    if not vector or isinstance(ord, str):
        raise NotImplementedError(f"For 'ops.norm', ord={ord!r} over dim={dim!r} is not supported: Spore has the "
                                  f"Frobenius norm (ord=None / 'fro') and vector p-norms (dim an int)")
    axes = _axes(dim)
    a = _C.abs(A)
    if ord == float("inf"):
        return _C.amax(a, axes, keepdim)
    if ord == float("-inf"):
        return _C.amin(a, axes, keepdim)
    if ord == 0:
        return _C.sum(_C.not_equal(A, 0.0).astype(A.dtype), axes, keepdim)
    p = float(ord)
    return _C.sum(a ** p, axes, keepdim) ** (1.0 / p)


def cumsum(x, axis, dtype=None):
    return _C.cumsum(x if dtype is None else x.astype(dtype), axis)


# ---- neural-network functions --------------------------------------------------------------------
def softmax(input, axis=-1, *, dtype=None):
    return _C.softmax(input if dtype is None else input.astype(dtype), axis)


def log_softmax(logits, axis=-1):
    return _C.log_softmax(logits, axis)


def _pair(v):
    return [v, v] if isinstance(v, int) else list(v)


def _pads(padding):
    if isinstance(padding, int):
        return [padding] * 4
    padding = list(padding)
    return padding if len(padding) == 4 else [padding[0], padding[0], padding[1], padding[1]]


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1):
    if pad_mode == "same":
        kh, kw = weight.shape[2:]
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        h, w = input.shape[2:]
        ph = max((-(-h // sh) - 1) * sh + (kh - 1) * dh + 1 - h, 0)
        pw = max((-(-w // sw) - 1) * sw + (kw - 1) * dw + 1 - w, 0)
        pads = [ph // 2, ph - ph // 2, pw // 2, pw - pw // 2]
    elif pad_mode == "valid":
        pads = [0, 0, 0, 0]
    else:
        pads = _pads(padding)
    return _C.conv2d(input, weight, bias, _pair(stride), pads, _pair(dilation), groups)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
    refuse("ops.max_pool2d", "Spore's pooling has no dilation or index output", dilation=(dilation, (1, (1, 1))),
           return_indices=(return_indices, False))
    return _C.max_pool2d(x, _pair(kernel_size), _pair(stride if stride is not None else kernel_size),
                         _pads(padding), ceil_mode)


def avg_pool2d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    refuse("ops.avg_pool2d", "Spore divides by the window size", divisor_override=(divisor_override, (None, 0)))
    return _C.avg_pool2d(input_x, _pair(kernel_size), _pair(stride), _pads(padding), ceil_mode, count_include_pad)


def adaptive_avg_pool2d(input, output_size):
    return _C.adaptive_avg_pool2d(input, _pair(output_size))


def dense(input, weight, bias=None):
    out = _C.matmul(input, weight._transpose2(-2, -1))  # weight (out, in)
    return out if bias is None else out + bias


def dropout(input, p=0.5, training=True, seed=None):
    refuse("ops.dropout", "per-op seeds are not supported; seed the global generator with ms.set_seed", 
           seed=(seed, None))
    return _C.dropout(input, p, training)


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1):
    refuse("ops.one_hot", "the classes are the last axis; move it with ops.transpose / ops.moveaxis",
           axis=(axis, -1))
    out = _C.one_hot(indices, int(depth), _C.DType.float32)
    if on_value != 1 or off_value != 0:
        out = out * (on_value - off_value) + off_value
    return out


def pad(input_x, padding, mode="constant", value=None):
    if mode != "constant":
        raise NotImplementedError(f"ops.pad: mode '{mode}' (only 'constant')")
    return _C.pad(input_x, list(padding), 0.0 if value is None else float(value))


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None):
    refuse("ops.interpolate", "Spore's nearest interpolation has no corner alignment",
           align_corners=(align_corners, (None, False)), recompute_scale_factor=(recompute_scale_factor, (None, False)))
    if mode != "nearest":
        raise NotImplementedError(f"ops.interpolate: mode '{mode}' (only 'nearest')")
    if size is None:
        sf = _pair(scale_factor) if not isinstance(scale_factor, float) else [scale_factor] * 2
        size = [int(input.shape[2] * sf[0]), int(input.shape[3] * sf[1])]
    return _C.upsample_nearest2d(input, _pair(size))


def batch_norm(input_x, running_mean, running_var, weight, bias, training=False, momentum=0.1, eps=1e-5):
    if training:
        y, mean_, var_ = _C.batch_norm_train(input_x, weight, bias, eps)
        _C.assign(running_mean, running_mean * (1 - momentum) + mean_ * momentum)
        _C.assign(running_var, running_var * (1 - momentum) + var_ * momentum)
        return y
    return _C.batch_norm_infer(input_x, weight, bias, running_mean, running_var, eps)


def layer_norm(input_x, normalized_shape, gamma=None, beta=None, eps=1e-5):
    nd = len(normalized_shape) if not isinstance(normalized_shape, int) else 1
    shape = list(input_x.shape[-nd:])
    g = gamma if gamma is not None else _C.ones(shape, input_x.dtype)
    b = beta if beta is not None else _C.zeros(shape, input_x.dtype)
    return _C.layer_norm(input_x, g, b, nd, eps)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    return _C.CrossEntropyLoss(weight, ignore_index, reduction, label_smoothing)(input, target)


def nll_loss(inputs, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    refuse("ops.nll_loss", "smooth the targets yourself (or use nn.CrossEntropyLoss(label_smoothing=...))",
           label_smoothing=(label_smoothing, (0.0, 0)))
    return _C.NLLLoss(weight, ignore_index, reduction)(inputs, target)


def mse_loss(input, target, reduction="mean"):
    return _C.MSELoss(reduction)(input, target)


def l1_loss(input, target, reduction="mean"):
    return _C.L1Loss(reduction)(input, target)


def binary_cross_entropy_with_logits(logits, label, weight=None, pos_weight=None, reduction="mean"):
    return _C.BCEWithLogitsLoss(reduction, weight, pos_weight)(logits, label)


# ---- shape and index -----------------------------------------------------------------------------
def reshape(input, shape):
    return input.reshape(shape)


def transpose(input, input_perm):
    return input.permute(list(input_perm))


def permute(input, axis):
    return input.permute(list(axis))


def swapaxes(input, axis0, axis1):
    return input.swapaxes(axis0, axis1)


def flatten(input, order="C", *, start_dim=1, end_dim=-1):
    refuse("ops.flatten", "Spore flattens in row-major order", order=(order, "C"))
    return input._flatten(start_dim, end_dim)


def squeeze(input, axis=None):
    return input.squeeze(axis)


def expand_dims(input_x, axis):
    return input_x.unsqueeze(axis)


unsqueeze = expand_dims


def broadcast_to(input, shape):
    return input.broadcast_to(list(shape))


def tile(input, dims):
    return input.tile(dims)


def concat(tensors, axis=0):
    return _C.concat(list(tensors), axis)


cat = concat


def stack(tensors, axis=0):
    return _C.stack(list(tensors), axis)


def split(tensor, split_size_or_sections, axis=0):
    n = tensor.shape[axis]
    if isinstance(split_size_or_sections, int):
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
    return tuple(_C.split(tensor, sizes, axis))


def chunk(input, chunks, axis=0):
    return tuple(_C.chunk(input, chunks, axis))


def gather(input_params, input_indices, axis, batch_dims=0):
    """MindSpore's Gather: index_select along axis (indices of any shape)."""
    refuse("ops.gather", "batch_dims > 0 is not supported; gather per batch element", batch_dims=(batch_dims, 0))
    flat = input_indices.reshape(-1)
    out = _C.index_select(input_params, axis, flat)
    shape = list(input_params.shape[:axis]) + list(input_indices.shape) + list(input_params.shape[axis + 1:])
    return out.reshape(shape)


def gather_elements(input, dim, index):
    return _C.gather(input, dim, index)


def index_select(input, axis, index):
    return _C.index_select(input, axis, index)


def scatter_add(input_x, indices, updates, axis=0):
    return _C.scatter_add(input_x, axis, indices, updates)


def topk(input, k, dim=None, largest=True, sorted=True):
    return tuple(_C.topk(input, k, -1 if dim is None else dim, largest, sorted))


def sort(input_x, axis=-1, descending=False):
    return tuple(_C.sort(input_x, axis, descending))


def argsort(input, axis=-1, descending=False):
    return _C.argsort(input, axis, descending)


def assign(variable, value):
    _C.assign(variable, value)
    return variable


def size(input_x):
    return input_x.size


def shape(input_x):
    return tuple(input_x.shape)


def rank(input_x):
    return input_x.ndim


def dtype(input_x):
    return input_x.dtype


# ---- creation ------------------------------------------------------------------------------------
def _shape(shape):
    return [shape] if isinstance(shape, int) else list(shape)


def zeros(size, dtype=None):
    return _C.zeros(_shape(size), dtype)


def ones(size, dtype=None):
    return _C.ones(_shape(size), dtype)


def full(size, fill_value, *, dtype=None):
    return _C.full(_shape(size), float(fill_value), dtype)


def fill(type, shape, value):
    return _C.full(_shape(shape), float(value), type)


def zeros_like(input, *, dtype=None):
    return _C.zeros(list(input.shape), dtype or input.dtype)


def ones_like(input, *, dtype=None):
    return _C.ones(list(input.shape), dtype or input.dtype)


def full_like(input, fill_value, *, dtype=None):
    return _C.full(list(input.shape), float(fill_value), dtype or input.dtype)


def arange(start=0, end=None, step=1, *, dtype=None):
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _C.DType.int64 if all(isinstance(v, int) for v in (start, end, step)) else _C.DType.float32
    return _C.arange(float(start), float(end), float(step), dtype)


def linspace(start, end, steps):
    return _C.linspace(float(start), float(end), int(steps), _C.DType.float32)


def eye(n, m=None, dtype=None):
    return _C.eye(n, -1 if m is None else m, dtype)


def rand(*size, dtype=None, seed=None):
    refuse("ops.rand", "per-op seeds are not supported; seed the global generator with ms.set_seed", seed=(seed, None))
    return _C.rand(_shape(size[0] if len(size) == 1 and not isinstance(size[0], int) else size), dtype)


def randn(*size, dtype=None, seed=None):
    refuse("ops.randn", "per-op seeds are not supported; seed the global generator with ms.set_seed", seed=(seed, None))
    return _C.randn(_shape(size[0] if len(size) == 1 and not isinstance(size[0], int) else size), dtype)


def uniform(shape, minval, maxval, seed=None, dtype=None):
    refuse("ops.uniform", "per-op seeds are not supported; seed the global generator with ms.set_seed", 
           seed=(seed, None))
    return _C.uniform(_shape(shape), float(minval), float(maxval), dtype)


def standard_normal(shape, seed=None):
    refuse("ops.standard_normal", "per-op seeds are not supported; seed the global generator with ms.set_seed",
           seed=(seed, None))
    return _C.randn(_shape(shape), None)


def randint(low, high, size, seed=None, *, dtype=None):
    refuse("ops.randint", "per-op seeds are not supported; seed the global generator with ms.set_seed", 
           seed=(seed, None))
    return _C.randint(int(low), int(high), _shape(size), dtype or _C.DType.int64)


def randperm(n, seed=0, offset=0, dtype=None):
    refuse("ops.randperm", "per-op seeds are not supported; seed the global generator with ms.set_seed", 
           seed=(seed, 0), offset=(offset, 0))
    return _C.randperm(int(n), dtype or _C.DType.int64)


def numel(input):
    return input.size


def is_tensor(obj):
    return isinstance(obj, Tensor)


def tensor_to_numpy(x):
    return np.asarray(x.asnumpy())
