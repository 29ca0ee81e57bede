"""MindSpore's primitive classes (ops.ReLU(), ops.MatMul(transpose_b=True), ops.ReduceMean(
keep_dims=True), ...): each instance holds its attributes and calls the C++ op."""
import functools

from .. import _C
from ..common.tensor import Tensor
from . import functional as F
from .._args import refuse

# Primitive.shard: the primitives whose C++ op the sharding engine has a rule for
# (src/parallel/sharding.cpp, Engine::call_with: elementwise ops, matmul, sum / mean, permute,
# reshape, softmax / log_softmax, conv2d, pools), with their number of tensor inputs (one strategy
# entry each).
SHARDABLE = {
    **{n: 1 for n in ("ReLU", "ReLU6", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Abs", "Neg",
                      "Sin", "Cos", "Erf", "Reciprocal", "SiLU", "GeLU", "ReduceSum", "ReduceMean", "Softmax",
                      "LogSoftmax", "Transpose", "Reshape", "MaxPool", "AvgPool")},
    **{n: 2 for n in ("Add", "Sub", "Mul", "Div", "RealDiv", "Pow", "Maximum", "Minimum", "MatMul", "Conv2D")},
}


class Primitive:
    """Base class: a named callable with attributes (add_prim_attr)."""

    def __init__(self, name=None):
        self.name = name or type(self).__name__
        self.attrs = {}

    def add_prim_attr(self, name, value):
        self.attrs[name] = value
        return self

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__name__ in SHARDABLE and "__call__" in cls.__dict__:
            cls.__call__ = _strategy_call(cls.__dict__["__call__"])

    def shard(self, in_strategy, out_strategy=None):
        """MindSpore's Primitive.shard: one tuple per tensor input, one entry per dimension (the
        pieces it is cut into), e.g. ``ops.MatMul().shard(((1, 2), (2, 1)))`` cuts the contraction
        over 2 ranks. Under set_auto_parallel_context(parallel_mode="semi_auto_parallel") with
        several ranks, inside Model's (sharded) step, each input moves to its cut before the op runs
        and the sharding engine computes the op on the pieces (a cut contraction's partial sums are
        all-reduced; MatMul's out_strategy asks for a reduce-scatter into that cut instead);
        elsewhere the strategy has no effect, as in MindSpore. Parameters used by the op stay whole
        (the op works on their pieces); nn.Dense.shard stores its weight as pieces. Primitives
        whose op the engine has no rule for refuse it."""
        name = type(self).__name__
        if name not in SHARDABLE:
            raise NotImplementedError(
                f"For '{name}.shard', Spore's sharding engine has no rule for this primitive, so a strategy "
                f"would be ignored; primitives that take shard(): {', '.join(sorted(SHARDABLE))}. Leave it "
                f"unsharded (its inputs are gathered whole) or shard the layer (nn.Dense.shard)")
        n = SHARDABLE[name]
        st = _check_strategy(name, "in_strategy", in_strategy)
        if len(st) != n:
            raise ValueError(f"For '{name}.shard', 'in_strategy' needs one entry per tensor input ({n}), "
                             f"got {len(st)}: {in_strategy!r}")
        out = None
        if out_strategy is not None:
            if name != "MatMul":
                raise NotImplementedError(f"For '{name}.shard', 'out_strategy' is supported for MatMul only "
                                          f"(the engine picks the output layout of other ops); drop it")
            out = _check_strategy(name, "out_strategy", out_strategy)
            if len(out) != 1:
                raise ValueError(f"For 'MatMul.shard', 'out_strategy' has one entry (the output), got {len(out)}")
        self.__dict__["_in_strategy"], self.__dict__["_out_strategy"] = st, out
        self.attrs["in_strategy"], self.attrs["out_strategy"] = in_strategy, out_strategy
        return self

    def __repr__(self):
        return f"Prim[{self.name}]"


def _check_strategy(name, what, strategy):
    ok = isinstance(strategy, (tuple, list)) and all(
        isinstance(e, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in e)
        for e in strategy)
    if not ok:
        raise ValueError(f"For '{name}.shard', '{what}' must be a tuple of tuples of ints >= 1 (one tuple per "
                         f"input, one entry per dimension), got {strategy!r}")
    return [list(e) for e in strategy]


def _strategy_call(call):
    """Wraps a shardable primitive's __call__: in a sharded region, inputs move to the strategy."""
    @functools.wraps(call)
    def wrapper(self, *args):
        st = self.__dict__.get("_in_strategy")
        if st is None or not _C.shard_region_active():
            return call(self, *args)
        args = list(args)
        pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        name = type(self).__name__
        if len(pos) != len(st):
            raise ValueError(f"For '{name}', the strategy has {len(st)} entries but the call has {len(pos)} tensor "
                             f"inputs")
        for i, entry in zip(pos, st):
            if len(entry) != args[i].ndim:
                raise ValueError(f"For '{name}', strategy entry {tuple(entry)} has {len(entry)} dimensions but "
                                 f"input {i} has shape {tuple(args[i].shape)}")
            args[i] = _C.shard_input(args[i], entry)
        out = self.__dict__.get("_out_strategy")
        if out is not None:
            with _C._MatmulOutScope(out[0]):
                return call(self, *args)
        return call(self, *args)
    return wrapper


PrimitiveWithInfer = Primitive
PrimitiveWithCheck = Primitive


def _unary(name, fn):
    def __call__(self, x):
        return fn(x)
    return type(name, (Primitive,), {"__call__": __call__})


def _binary(name, fn):
    def __call__(self, x, y):
        return fn(x, y)
    return type(name, (Primitive,), {"__call__": __call__})


ReLU = _unary("ReLU", _C.relu)
ReLU6 = _unary("ReLU6", _C.relu6)
Sigmoid = _unary("Sigmoid", _C.sigmoid)
Tanh = _unary("Tanh", _C.tanh)
Exp = _unary("Exp", _C.exp)
Log = _unary("Log", _C.log)
Sqrt = _unary("Sqrt", _C.sqrt)
Rsqrt = _unary("Rsqrt", _C.rsqrt)
Square = _unary("Square", _C.square)
Abs = _unary("Abs", _C.abs)
Neg = _unary("Neg", _C.neg)
Sin = _unary("Sin", _C.sin)
Cos = _unary("Cos", _C.cos)
Floor = _unary("Floor", _C.floor)
Ceil = _unary("Ceil", _C.ceil)
Round = _unary("Round", _C.round)
Sign = _unary("Sign", _C.sign)
Erf = _unary("Erf", _C.erf)
Reciprocal = _unary("Reciprocal", _C.reciprocal)
LogicalNot = _unary("LogicalNot", _C.logical_not)
SiLU = _unary("SiLU", _C.silu)
StopGradient = _unary("StopGradient", _C.stop_gradient)
ZerosLike = _unary("ZerosLike", F.zeros_like)
OnesLike = _unary("OnesLike", F.ones_like)
Identity = _unary("Identity", lambda x: x)
Size = _unary("Size", lambda x: x.size)
Rank = _unary("Rank", lambda x: x.ndim)
Shape = _unary("Shape", lambda x: tuple(x.shape))
DType = _unary("DType", lambda x: x.dtype)
Add = _binary("Add", _C.add)
Sub = _binary("Sub", _C.sub)
Mul = _binary("Mul", _C.mul)
Div = _binary("Div", _C.div)
RealDiv = _binary("RealDiv", _C.div)
Pow = _binary("Pow", _C.pow)
Maximum = _binary("Maximum", _C.maximum)
Minimum = _binary("Minimum", _C.minimum)
Equal = _binary("Equal", _C.equal)
NotEqual = _binary("NotEqual", _C.not_equal)
Less = _binary("Less", _C.less)
LessEqual = _binary("LessEqual", _C.less_equal)
Greater = _binary("Greater", _C.greater)
GreaterEqual = _binary("GreaterEqual", _C.greater_equal)
LogicalAnd = _binary("LogicalAnd", _C.logical_and)
LogicalOr = _binary("LogicalOr", _C.logical_or)
Reshape = _binary("Reshape", F.reshape)
Transpose = _binary("Transpose", F.transpose)
Cast = _binary("Cast", F.cast)
Tile = _binary("Tile", F.tile)
Assign = _binary("Assign", F.assign)
ExpandDims = _binary("ExpandDims", F.expand_dims)


class Select(Primitive):
    def __call__(self, cond, x, y):
        return _C.where(cond, x, y)


class Fill(Primitive):
    def __call__(self, type, shape, value):
        return F.fill(type, shape, value)


class Zeros(Primitive):
    def __call__(self, size, type=None):
        return F.zeros(size, type)


class Ones(Primitive):
    def __call__(self, size, type=None):
        return F.ones(size, type)


class BroadcastTo(Primitive):
    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def __call__(self, x):
        return x.broadcast_to(list(self.shape))


class MatMul(Primitive):
    def __init__(self, transpose_a=False, transpose_b=False):
        super().__init__()
        self.transpose_a, self.transpose_b = transpose_a, transpose_b

    def __call__(self, x, y):
        if self.transpose_a:
            x = x._transpose2(-2, -1)
        if self.transpose_b:
            y = y._transpose2(-2, -1)
        return _C.matmul(x, y)


BatchMatMul = MatMul


class BiasAdd(Primitive):
    def __call__(self, x, bias):
        shape = [1] * x.ndim
        shape[1] = bias.shape[0]
        return x + bias.reshape(shape)


def _reduce(name, fn):
    class Reduce(Primitive):
        def __init__(self, keep_dims=False):
            super().__init__(name)
            self.keep_dims = keep_dims

        def __call__(self, x, axis=()):
            return fn(x, F._axes(axis), self.keep_dims)
    Reduce.__name__ = Reduce.__qualname__ = name
    if name in SHARDABLE:  # named after __init_subclass__ ran
        Reduce.__call__ = _strategy_call(Reduce.__call__)
    return Reduce


ReduceSum = _reduce("ReduceSum", _C.sum)
ReduceMean = _reduce("ReduceMean", _C.mean)
ReduceMax = _reduce("ReduceMax", _C.amax)
ReduceMin = _reduce("ReduceMin", _C.amin)
ReduceProd = _reduce("ReduceProd", _C.prod)


class _AxisOp(Primitive):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis


class Softmax(_AxisOp):
    def __call__(self, x):
        return _C.softmax(x, self.axis if isinstance(self.axis, int) else self.axis[0])


class LogSoftmax(_AxisOp):
    def __call__(self, x):
        return _C.log_softmax(x, self.axis)


class Argmax(_AxisOp):
    def __init__(self, axis=-1, output_type=None):
        super().__init__(axis)
        self.output_type = output_type

    def __call__(self, x):
        out = _C.argmax(x, self.axis, False)
        return out if self.output_type is None else out.astype(self.output_type)


class Argmin(Argmax):
    def __call__(self, x):
        out = _C.argmin(x, self.axis, False)
        return out if self.output_type is None else out.astype(self.output_type)


class ArgMaxWithValue(Primitive):
    def __init__(self, axis=0, keep_dims=False):
        super().__init__()
        self.axis, self.keep_dims = axis, keep_dims

    def __call__(self, x):
        return _C.argmax(x, self.axis, self.keep_dims), _C.amax(x, [self.axis], self.keep_dims)


class Concat(_AxisOp):
    def __init__(self, axis=0):
        super().__init__(axis)

    def __call__(self, xs):
        return _C.concat(list(xs), self.axis)


class Stack(_AxisOp):
    def __init__(self, axis=0):
        super().__init__(axis)

    def __call__(self, xs):
        return _C.stack(list(xs), self.axis)


class Split(Primitive):
    def __init__(self, axis=0, output_num=1):
        super().__init__()
        self.axis, self.output_num = axis, output_num

    def __call__(self, x):
        return tuple(_C.chunk(x, self.output_num, self.axis))


class Squeeze(Primitive):
    def __init__(self, axis=()):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return x.squeeze(None if self.axis == () else self.axis)


class Flatten(Primitive):
    def __call__(self, x):
        return x._flatten(1, -1)


class OneHot(Primitive):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def __call__(self, indices, depth, on_value, off_value):
        return F.one_hot(indices, depth, float(on_value), float(off_value))


class Gather(Primitive):
    def __call__(self, params, indices, axis, batch_dims=0):
        refuse("ops.Gather", "batch_dims > 0 is not supported; gather per batch element", batch_dims=(batch_dims, 0))
        return F.gather(params, indices, axis)


class GatherD(Primitive):
    def __call__(self, x, dim, index):
        return _C.gather(x, dim, index)


class TopK(Primitive):
    def __init__(self, sorted=True):
        super().__init__()
        self.sorted = sorted

    def __call__(self, x, k):
        return tuple(_C.topk(x, k, -1, True, self.sorted))


class Sort(Primitive):
    def __init__(self, axis=-1, descending=False):
        super().__init__()
        self.axis, self.descending = axis, descending

    def __call__(self, x):
        return tuple(_C.sort(x, self.axis, self.descending))


class CumSum(Primitive):
    def __init__(self, exclusive=False, reverse=False):
        super().__init__()
        if exclusive or reverse:
            raise NotImplementedError("CumSum: exclusive / reverse")

    def __call__(self, x, axis):
        return _C.cumsum(x, axis)


class GeLU(Primitive):
    def __call__(self, x):
        return _C.gelu(x, True)


class LeakyReLU(Primitive):
    def __init__(self, alpha=0.2):
        super().__init__()
        self.alpha = alpha

    def __call__(self, x):
        return _C.leaky_relu(x, self.alpha)


class Conv2D(Primitive):
    def __init__(self, out_channel, kernel_size, mode=1, pad_mode="valid", pad=0, stride=1, dilation=1, group=1,
                 data_format="NCHW"):
        refuse("ops.Conv2D", "Spore's convolution is the cross-correlation (mode 1) on NCHW", mode=(mode, 1),
               data_format=(data_format, "NCHW"))
        self.out_channel = int(out_channel)
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) \
            else tuple(kernel_size)
        super().__init__()
        self.pad_mode, self.pad, self.stride, self.dilation, self.group = pad_mode, pad, stride, dilation, group

    def __call__(self, x, w):
        if w.ndim == 4 and (w.shape[0] != self.out_channel or tuple(w.shape[2:]) != self.kernel_size):
            raise ValueError(f"For 'Conv2D', the weight's shape {tuple(w.shape)} does not match out_channel="
                             f"{self.out_channel} and kernel_size={self.kernel_size} given to the primitive")
        stride = self.stride if isinstance(self.stride, int) else self.stride[-1]
        dilation = self.dilation if isinstance(self.dilation, int) else self.dilation[-1]
        return F.conv2d(x, w, None, stride, self.pad_mode, self.pad, dilation, self.group)


class _Pool(Primitive):
    def __init__(self, kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"):
        refuse(type(self).__name__, "Spore's pooling takes NCHW", data_format=(data_format, "NCHW"))
        super().__init__()
        k = kernel_size if isinstance(kernel_size, int) else kernel_size[-1]
        s = strides if isinstance(strides, int) else strides[-1]
        self.kernel_size, self.strides, self.pad_mode = k, s, pad_mode.lower()


class MaxPool(_Pool):
    def __call__(self, x):
        return _C.MaxPool2d(self.kernel_size, self.strides, self.pad_mode, 0, False, True)(x)


class AvgPool(_Pool):
    def __call__(self, x):
        return _C.AvgPool2d(self.kernel_size, self.strides, self.pad_mode, 0, False, True)(x)


class SoftmaxCrossEntropyWithLogits(Primitive):
    """(loss per sample, gradient w.r.t. logits) for dense labels."""

    def __call__(self, logits, labels):
        p = _C.softmax(logits, -1)
        loss = _C.neg(_C.sum(labels * _C.log_softmax(logits, -1), [-1], False))
        return loss, p - labels


class SparseSoftmaxCrossEntropyWithLogits(Primitive):
    def __init__(self, is_grad=False):
        refuse("ops.SparseSoftmaxCrossEntropyWithLogits",
               "it returns the mean loss; take the gradient with value_and_grad",
               is_grad=(is_grad, False))
        super().__init__()
        self.is_grad = is_grad

    def __call__(self, logits, labels):
        return _C.SoftmaxCrossEntropyWithLogits(True, "mean")(logits, labels)


class Print(Primitive):
    """Prints its inputs (PyNative: now; Graph mode: while tracing, shapes only)."""

    def __call__(self, *inputs):
        print(*inputs)


class Dropout(Primitive):
    def __init__(self, keep_prob=0.5, Seed0=0, Seed1=0):
        refuse("ops.Dropout", "per-op seeds are not supported; seed the global generator with ms.set_seed",
               Seed0=(Seed0, 0), Seed1=(Seed1, 0))
        super().__init__()
        self.p = 1.0 - keep_prob

    def __call__(self, x):
        out = _C.dropout(x, self.p, True)
        return out, _C.not_equal(out, 0.0)
