"""The public surface of Spore's ops in Python, in one place.

- PRIMITIVES: every row of src/ops/ops.def and what reaches it from Python: the names in
  spore.ops (MindSpore's functional API), a Tensor method, or why a user never calls it directly.
  (A backend's private ops, such as the CPU's conv2d_fused, are not ops.def rows and not here.)
- DEFAULTS: the defaults of each spore.ops function that has any. MindSpore's own defaults win where
  the API is MindSpore's; the bindings in spore._C carry none, so this table and
  spore/ops/functional.py are the only two places, and tests/python/test_op_surface.py checks
  they agree (and that every ops.def row is in PRIMITIVES).
- CPP_DIFFERENCES: where Spore's C++ API (include/spore/ops.h, libtorch's conventions) has another
  default than Python's MindSpore one; docs/python.md lists each.
"""

# ops.def name -> how Python reaches it. "ops.x": spore.ops.x; "Tensor.x": a Tensor method;
# "internal: ...": not called directly, and why.
PRIMITIVES = {
    # elementwise
    "neg": "ops.neg", "abs": "ops.abs", "exp": "ops.exp", "log": "ops.log", "sqrt": "ops.sqrt",
    "rsqrt": "ops.rsqrt", "sin": "ops.sin", "cos": "ops.cos", "tanh": "ops.tanh", "sigmoid": "ops.sigmoid",
    "relu": "ops.relu", "leaky_relu": "ops.leaky_relu", "silu": "ops.silu", "gelu": "ops.gelu",
    "softplus": "ops.softplus", "clamp": "ops.clamp", "floor": "ops.floor", "ceil": "ops.ceil",
    "round": "ops.round", "sign": "ops.sign", "erf": "ops.erf", "logical_not": "ops.logical_not",
    "cast": "ops.cast", "add": "ops.add", "sub": "ops.sub", "mul": "ops.mul", "div": "ops.div",
    "pow": "ops.pow", "maximum": "ops.maximum", "minimum": "ops.minimum", "equal": "ops.equal",
    "not_equal": "ops.not_equal", "less": "ops.less", "less_equal": "ops.less_equal",
    "greater": "ops.greater", "greater_equal": "ops.greater_equal", "logical_and": "ops.logical_and",
    "logical_or": "ops.logical_or", "logical_xor": "ops.logical_xor", "where": "ops.where",
    "relu_grad": "internal: relu's gradient rule",
    # reductions
    "sum": "ops.sum", "mean": "ops.mean", "max": "ops.max", "min": "ops.min", "prod": "ops.prod",
    "argmax": "ops.argmax", "argmin": "ops.argmin",
    # views and copies
    "reshape": "ops.reshape", "permute": "ops.permute", "slice": "Tensor.__getitem__",
    "expand": "ops.broadcast_to", "copy": "Tensor.copy", "to_device": "Tensor.move_to",
    # linear algebra, convolution, pooling, normalisation
    "matmul": "ops.matmul", "conv2d": "ops.conv2d",
    "conv2d_backward_data": "internal: conv2d's gradient rule and the transposed convolution of nn.Conv2dTranspose",
    "conv2d_backward_weight": "internal: conv2d's gradient rule",
    "max_pool2d": "ops.max_pool2d", "max_pool2d_backward": "internal: max_pool2d's gradient rule",
    "avg_pool2d": "ops.avg_pool2d", "avg_pool2d_backward": "internal: avg_pool2d's gradient rule",
    "adaptive_avg_pool2d": "ops.adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward": "internal: adaptive_avg_pool2d's gradient rule",
    "batch_norm": "ops.batch_norm", "batch_norm_inference": "ops.batch_norm",
    "batch_norm_backward": "internal: batch_norm's gradient rule",
    "layer_norm": "ops.layer_norm", "layer_norm_backward": "internal: layer_norm's gradient rule",
    "softmax": "ops.softmax", "log_softmax": "ops.log_softmax",
    # shape and index
    "concat": "ops.concat", "split": "ops.split", "gather": "ops.gather", "index_select": "ops.index_select",
    "scatter_add": "ops.scatter_add", "pad": "ops.pad", "one_hot": "ops.one_hot", "dropout": "ops.dropout",
    "upsample_nearest2d": "ops.interpolate",
    "upsample_nearest2d_backward": "internal: upsample_nearest2d's gradient rule",
    "topk": "ops.topk", "sort": "ops.sort", "cumsum": "ops.cumsum", "assign": "ops.assign",
    # optimizers and mixed precision (called by nn.Momentum / nn.Adam / nn.RMSProp and amp)
    "apply_momentum": "internal: nn.Momentum's update",
    "apply_adam": "internal: nn.Adam's update",
    "apply_rms_prop": "internal: nn.RMSProp's update",
    "all_finite": "internal: amp's overflow check (amp.all_finite)",
    # made by Graph mode's passes, never traced from user code
    "fused_elementwise": "internal: Graph mode's elementwise fusion",
    "softmax_cross_entropy_fused": "internal: the cross-entropy losses' fused kernel (ops.cross_entropy)",
    "matmul_epilogue": "internal: Graph mode's Dense fusion on accelerators (cuBLASLt's bias / activation epilogue)",
    "fused_apply_momentum": "internal: Graph mode's multi-tensor optimizer update",
    "fused_apply_adam": "internal: Graph mode's multi-tensor optimizer update",
}

# spore.ops function -> its defaults (MindSpore's where MindSpore has the function).
DEFAULTS = {
    "amax": {"axis": None, "keepdims": False},
    "amin": {"axis": None, "keepdims": False},
    "arange": {"start": 0, "end": None, "step": 1, "dtype": None},
    "argmax": {"dim": None, "keepdim": False},
    "argmin": {"axis": None, "keepdims": False},
    "argsort": {"axis": -1, "descending": False},
    "avg_pool2d": {"kernel_size": 1, "stride": 1, "padding": 0, "ceil_mode": False, "count_include_pad": True,
                   "divisor_override": None},
    "batch_norm": {"training": False, "momentum": 0.1, "eps": 1e-05},
    "binary_cross_entropy_with_logits": {"weight": None, "pos_weight": None, "reduction": "mean"},
    "cat": {"axis": 0},
    "chunk": {"axis": 0},
    "clamp": {"min": None, "max": None},
    "clip": {"min": None, "max": None},
    "clip_by_global_norm": {"clip_norm": 1.0, "use_norm": None},
    "clip_by_norm": {"norm_type": 2.0, "error_if_nonfinite": False},
    "clip_by_value": {"clip_value_min": None, "clip_value_max": None},
    "concat": {"axis": 0},
    "conv2d": {"bias": None, "stride": 1, "pad_mode": "valid", "padding": 0, "dilation": 1, "groups": 1},
    "cross_entropy": {"weight": None, "ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0},
    "cumsum": {"dtype": None},
    "dense": {"bias": None},
    "dropout": {"p": 0.5, "training": True, "seed": None},
    "eye": {"m": None, "dtype": None},
    "flatten": {"order": "C", "start_dim": 1, "end_dim": -1},
    "full": {"dtype": None},
    "full_like": {"dtype": None},
    "gather": {"batch_dims": 0},
    "gelu": {"approximate": "none"},
    "interpolate": {"size": None, "scale_factor": None, "mode": "nearest", "align_corners": None,
                    "recompute_scale_factor": None},
    "l1_loss": {"reduction": "mean"},
    "layer_norm": {"gamma": None, "beta": None, "eps": 1e-05},
    "leaky_relu": {"alpha": 0.2},
    "log_softmax": {"axis": -1},
    "logsumexp": {"keep_dims": False},
    "max": {"axis": None, "keepdims": False, "initial": None, "where": None},
    "max_pool2d": {"stride": None, "padding": 0, "dilation": 1, "return_indices": False, "ceil_mode": False},
    "mean": {"axis": None, "keep_dims": False},
    "min": {"axis": None, "keepdims": False, "initial": None, "where": None},
    "mse_loss": {"reduction": "mean"},
    "nll_loss": {"weight": None, "ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0},
    "norm": {"ord": None, "dim": None, "keepdim": False, "dtype": None},
    "one_hot": {"on_value": 1, "off_value": 0, "axis": -1},
    "ones": {"dtype": None},
    "ones_like": {"dtype": None},
    "pad": {"mode": "constant", "value": None},
    "prod": {"axis": None, "keep_dims": False},
    "rand": {"dtype": None, "seed": None},
    "randint": {"seed": None, "dtype": None},
    "randn": {"dtype": None, "seed": None},
    "randperm": {"seed": 0, "offset": 0, "dtype": None},
    "scatter_add": {"axis": 0},
    "softmax": {"axis": -1, "dtype": None},
    "softplus": {"beta": 1, "threshold": 20},
    "sort": {"axis": -1, "descending": False},
    "split": {"axis": 0},
    "squeeze": {"axis": None},
    "stack": {"axis": 0},
    "standard_normal": {"seed": None},
    "std": {"axis": None, "ddof": 0, "keepdims": False},
    "sum": {"dim": None, "keepdim": False, "dtype": None},
    "topk": {"dim": None, "largest": True, "sorted": True},
    "uniform": {"seed": None, "dtype": None},
    "var": {"axis": None, "ddof": 0, "keepdims": False},
    "zeros": {"dtype": None},
    "zeros_like": {"dtype": None},
}

# Python (MindSpore) vs C++ (include/spore/ops.h, libtorch's convention): intended differences.
CPP_DIFFERENCES = {
    "leaky_relu": "alpha: Python 0.2 (mindspore.ops.leaky_relu), C++ 0.01 (torch::leaky_relu)",
    "gelu": "approximate: Python 'none' (mindspore.ops.gelu; nn.GELU defaults to the tanh form, as "
            "MindSpore's), C++ false (exact, torch::gelu)",
    "dropout": "p: Python 0.5 (mindspore.ops.dropout), C++ has no default (p is required)",
    "topk": "dim: Python None, the last axis (mindspore.ops.topk), C++ -1, the same axis",
}
