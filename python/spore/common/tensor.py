"""ms.Tensor is spore._C.Tensor (so every op result is one); this module adds its Python-side
methods: MindSpore's names and argument conventions (reshape(*shape), transpose(*axes), sum(axis,
keepdims), ...), indexing, printing, and the GRAPH_MODE checks that name the user's line when a
construct reads a tensor's value while it is being traced."""
import numpy as np

from .. import _C
from .._tracing import trace_error
from .._args import refuse as _refuse

Tensor = _C.Tensor


def _shape_args(args):
    if len(args) == 1 and not isinstance(args[0], int):
        return list(args[0])
    return list(args)


def _axes(axis):
    if axis is None:
        return None
    return [axis] if isinstance(axis, int) else list(axis)


# ---- reading values (not while tracing) ----------------------------------------------------------
_asnumpy = Tensor.asnumpy
_item = Tensor.item
_bool = Tensor.__bool__
_float = Tensor.__float__
_int = Tensor.__int__


def _check_concrete(t, what, alternative):
    if t.is_symbolic:
        raise trace_error(what, alternative)


def asnumpy(self):
    _check_concrete(self, "Reading a tensor's value (asnumpy)", "Compute with ops inside construct, or return the "
                    "tensor and read it after the call.")
    return _asnumpy(self)


def item(self, index=None):
    _check_concrete(self, "Reading a tensor's value (item)", "Compute with ops inside construct, or return the "
                    "tensor and read it after the call.")
    if index is not None:
        return self.reshape(-1)[index].item()
    return _item(self)


def __bool__(self):
    _check_concrete(self, "Python control flow on a tensor's value (if / while / and / or / bool())",
                    "Use ops.select / ops.where to choose between tensors, or make the condition a Python "
                    "value (a constructor argument); PYNATIVE_MODE runs such code as written.")
    return _bool(self)


def __float__(self):
    _check_concrete(self, "float(tensor)", "Keep the value as a tensor inside construct.")
    return _float(self)


def __int__(self):
    _check_concrete(self, "int(tensor)", "Keep the value as a tensor inside construct.")
    return _int(self)


def tolist(self):
    return asnumpy(self).tolist()


# ---- shape and views -----------------------------------------------------------------------------
def reshape(self, *shape):
    return self._reshape(_shape_args(shape))


def view(self, *shape):
    return self._view(_shape_args(shape))


def transpose(self, *axes):
    """MindSpore / numpy: permute the axes (reversed when none are given)."""
    if not axes or (len(axes) == 1 and axes[0] is None):
        return self.permute(list(reversed(range(self.ndim))))
    return self.permute(_shape_args(axes))


def squeeze(self, axis=None):
    if axis is None:
        return self._squeeze_all()
    out = self
    for a in sorted((a % self.ndim for a in _axes(axis)), reverse=True):
        out = out._squeeze(a)
    return out


def flatten(self, order="C", *, start_dim=0, end_dim=-1):
    _refuse("Tensor.flatten", "Spore flattens in row-major order; use order='C'", order=(order, "C"))
    return self._flatten(start_dim, end_dim)


def expand_as(self, other):
    return self.broadcast_to(other.shape)


def ravel(self):
    return self.reshape(-1)


# ---- reductions and math (MindSpore's Tensor methods) ---------------------------------------------
def _sum(self, axis=None, dtype=None, keepdims=False, initial=None):
    x = self if dtype is None else self.astype(dtype)
    if x.dtype == _C.DType.bool:
        x = x.astype(_C.DType.int64)
    out = _C.sum(x, _axes(axis), keepdims)
    return out if initial is None else out + initial


def mean(self, axis=None, keep_dims=False):
    return _C.mean(self, _axes(axis), keep_dims)


def _max(self, axis=None, keepdims=False, *, initial=None, where=None, return_indices=False):
    _refuse("Tensor.max", "reduce first and combine with ops.maximum / ops.minimum / ops.where",
            initial=(initial, None), where=(where, None))
    if return_indices:
        return _C.amax(self, _axes(axis), keepdims), _C.argmax(self, axis, keepdims)
    return _C.amax(self, _axes(axis), keepdims)


def _min(self, axis=None, keepdims=False, *, initial=None, where=None, return_indices=False):
    _refuse("Tensor.min", "reduce first and combine with ops.maximum / ops.minimum / ops.where",
            initial=(initial, None), where=(where, None))
    if return_indices:
        return _C.amin(self, _axes(axis), keepdims), _C.argmin(self, axis, keepdims)
    return _C.amin(self, _axes(axis), keepdims)


def argmax(self, axis=None, keepdims=False):
    if axis is None:
        return _C.argmax(self.reshape(-1), 0, False)
    return _C.argmax(self, axis, keepdims)


def argmin(self, axis=None, keepdims=False):
    if axis is None:
        return _C.argmin(self.reshape(-1), 0, False)
    return _C.argmin(self, axis, keepdims)


def _all(self, axis=None, keep_dims=False):
    return _C.amin(self.astype(_C.DType.bool).astype(_C.DType.int32), _axes(axis), keep_dims).astype(_C.DType.bool)


def _any(self, axis=None, keep_dims=False):
    return _C.amax(self.astype(_C.DType.bool).astype(_C.DType.int32), _axes(axis), keep_dims).astype(_C.DType.bool)


def _std(self, axis=None, ddof=0, keepdims=False):
    return _C.std(self, _axes(axis), ddof, keepdims)


def _var(self, axis=None, ddof=0, keepdims=False):
    return _C.var(self, _axes(axis), ddof, keepdims)


def prod(self, axis=None, keep_dims=False):
    return _C.prod(self, _axes(axis), keep_dims)


def clip(self, xmin=None, xmax=None):
    return _C.clamp(self, None if xmin is None else float(xmin), None if xmax is None else float(xmax))


def norm(self, ord=None, dim=None, keepdim=False):
    if ord not in (None, 2, "fro"):
        raise NotImplementedError("Tensor.norm: only the 2-norm / Frobenius norm")
    return _C.sqrt(_C.sum(_C.square(self), _axes(dim), keepdim))


def fill(self, value):
    return _C.full(list(self.shape), float(value), self.dtype)


def fill_(self, value):
    _C.assign(self, value)
    return self


def zero_(self):
    _C.assign(self, 0)
    return self


def is_floating_point(self):
    return self.dtype.is_floating_point


def _repr(self):
    shape = list(self.shape)
    if self.is_symbolic:
        return f"Tensor(shape={shape}, dtype={self.dtype!r}, traced)"
    return f"Tensor(shape={shape}, dtype={self.dtype!r}, value=\n{self._str()})"


def _str(self):
    if self.is_symbolic:
        return _repr(self)
    return self._str()


# ---- indexing ------------------------------------------------------------------------------------
def _index_tensor(k):
    if isinstance(k, Tensor):
        return k
    return Tensor(np.asarray(k))


def _normalize_key(self, key):
    if not isinstance(key, tuple):
        key = (key,)
    # A boolean mask over all dims is handled by the caller; here: basic and integer-array keys.
    n_dims = sum(1 for k in key if k is not None and k is not Ellipsis and not
                 (isinstance(k, (Tensor, np.ndarray)) and k.dtype in (_C.DType.bool, np.bool_)))
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (self.ndim - n_dims))
        else:
            out.append(k)
    if not any(k is Ellipsis for k in key):
        out.extend([slice(None)] * max(0, self.ndim - n_dims))
    return out


def __getitem__(self, key):
    if isinstance(key, Tensor) and key.dtype == _C.DType.bool or (
            isinstance(key, np.ndarray) and key.dtype == np.bool_):
        if self.is_symbolic:
            raise trace_error("Boolean-mask indexing", "Its result's shape depends on the values; use ops.where / "
                              "ops.select instead.")
        mask = key.asnumpy() if isinstance(key, Tensor) else key
        return Tensor(np.ascontiguousarray(self.asnumpy()[mask]))
    out, dim = self, 0
    for k in _normalize_key(self, key):
        if k is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(k, (bool, np.bool_)):
            out = out.unsqueeze(dim)
            if not k:
                out = out._slice(dim, 0, 0, 1)
            dim += 1
        elif isinstance(k, (int, np.integer)):
            n = out.shape[dim]
            if not -n <= int(k) < n:
                raise IndexError(f"index {int(k)} is out of bounds for axis {dim} with size {n}")
            out = out._select(dim, int(k) % n)
        elif isinstance(k, slice):
            start, stop, step = k.indices(out.shape[dim])
            if step <= 0:
                raise IndexError("slices with a negative or zero step are not supported; use ops.flip")
            stop = max(stop, start)
            if (start, stop, step) != (0, out.shape[dim], 1):
                out = out._slice(dim, start, stop, step)
            dim += 1
        else:  # integer tensor / list / array: gather along dim
            idx = _index_tensor(k)
            if idx.dtype not in (_C.DType.int32, _C.DType.int64):
                raise IndexError(f"tensors used as indices must be integer, got {idx.dtype!r}")
            flat = idx.reshape(-1)
            if not flat.is_symbolic and flat.size and (int(_C.amin(flat, None, False)) < 0):
                flat = _C.where(_C.less(flat, 0), _C.add(flat, out.shape[dim]), flat)
            sel = _C.index_select(out, dim, flat)
            shape = list(out.shape[:dim]) + list(idx.shape) + list(out.shape[dim + 1:])
            out = sel.reshape(shape)
            dim += idx.ndim
    return out


def __setitem__(self, key, value):
    if isinstance(key, Tensor) and key.dtype == _C.DType.bool:
        v = value if isinstance(value, Tensor) else _C._tensor_like(value, self)
        _C.assign(self, _C.where(key, v.astype(self.dtype), self))
        return
    keys = key if isinstance(key, tuple) else (key,)
    if any(not (k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice))) for k in keys):
        raise NotImplementedError("Tensor.__setitem__ takes ints, slices, None, ... and boolean masks; for "
                                  "integer-array indices use ops.scatter_add / ops.where")
    _C.assign(self[key], value)  # basic indexing gives a view of self


def __iter__(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self.shape[0]):
        yield self._select(0, i)


def __format__(self, spec):
    if self.ndim == 0 and not self.is_symbolic:
        return format(self.item(), spec)
    return str(self)


def __reduce__(self):  # pickling / copy.deepcopy
    return (Tensor, (np.array(self.asnumpy()),))


def __deepcopy__(self, memo):
    return Tensor(np.array(self.asnumpy()))


_eq, _ne = Tensor.__eq__, Tensor.__ne__


def __eq__(self, other):  # elementwise; objects that are not array-like compare unequal
    try:
        return _eq(self, other)
    except TypeError:
        return NotImplemented


def __ne__(self, other):
    try:
        return _ne(self, other)
    except TypeError:
        return NotImplemented


_METHODS = {
    "__eq__": __eq__, "__ne__": __ne__,
    "asnumpy": asnumpy, "numpy": asnumpy, "item": item, "__bool__": __bool__, "__float__": __float__,
    "__int__": __int__, "tolist": tolist, "reshape": reshape, "view": view, "transpose": transpose,
    "squeeze": squeeze, "flatten": flatten, "expand_as": expand_as, "ravel": ravel, "sum": _sum, "mean": mean,
    "max": _max, "min": _min, "amax": _max, "amin": _min, "argmax": argmax, "argmin": argmin, "all": _all,
    "any": _any, "std": _std, "var": _var, "prod": prod, "clip": clip, "clamp": clip, "norm": norm, "fill": fill,
    "fill_": fill_, "zero_": zero_, "is_floating_point": is_floating_point, "__repr__": _repr, "__str__": _str,
    "__getitem__": __getitem__, "__setitem__": __setitem__, "__iter__": __iter__, "__format__": __format__,
    "__reduce__": __reduce__, "__deepcopy__": __deepcopy__,
    "T": property(lambda self: transpose(self)),
    "mT": property(lambda self: self._transpose2(-2, -1)),
    "float": lambda self: self.astype(_C.DType.float32),
    "half": lambda self: self.astype(_C.DType.float16),
    "double": lambda self: self.astype(_C.DType.float64),
    "int": lambda self: self.astype(_C.DType.int32),
    "long": lambda self: self.astype(_C.DType.int64),
    "bool": lambda self: self.astype(_C.DType.bool),
    "abs": lambda self: _C.abs(self), "exp": lambda self: _C.exp(self), "log": lambda self: _C.log(self),
    "sqrt": lambda self: _C.sqrt(self), "rsqrt": lambda self: _C.rsqrt(self), "square": lambda self: _C.square(self),
    "sigmoid": lambda self: _C.sigmoid(self), "tanh": lambda self: _C.tanh(self), "relu": lambda self: _C.relu(self),
    "floor": lambda self: _C.floor(self), "ceil": lambda self: _C.ceil(self), "round": lambda self: _C.round(self),
    "sign": lambda self: _C.sign(self), "neg": lambda self: _C.neg(self), "reciprocal": lambda self: _C.reciprocal(self),
    "pow": lambda self, e: self ** e, "add": lambda self, o: self + o, "sub": lambda self, o: self - o,
    "mul": lambda self, o: self * o, "div": lambda self, o: self / o, "matmul": lambda self, o: _C.matmul(self, o),
    "equal": lambda self, o: self == o, "softmax": lambda self, axis=-1: _C.softmax(self, axis),
    "log_softmax": lambda self, axis=-1: _C.log_softmax(self, axis),
    "cumsum": lambda self, axis=0, dtype=None: _C.cumsum(self if dtype is None else self.astype(dtype), axis),
    "tile": lambda self, reps: _tile(self, reps),
    "repeat_interleave": lambda self, repeats, dim=None: _repeat_interleave(self, repeats, dim),
    "narrow": lambda self, axis, start, length: self._slice(axis, start, start + length, 1),
    "size_of": lambda self: self.nbytes,
    "to_tensor": lambda self: self,
    "init_data": lambda self: self,
    "set_dtype": lambda self, dtype: self.astype(dtype),
}


def _tile(x, reps):
    reps = [reps] if isinstance(reps, int) else list(reps)
    while len(reps) < x.ndim:
        reps.insert(0, 1)
    while x.ndim < len(reps):
        x = x.unsqueeze(0)
    out = x
    for d, r in enumerate(reps):
        if r != 1:
            out = _C.concat([out] * r, d)
    return out


def _repeat_interleave(x, repeats, dim):
    if dim is None:
        x, dim = x.reshape(-1), 0
    shape = list(x.shape)
    y = x.unsqueeze(dim + 1).broadcast_to(shape[:dim + 1] + [repeats] + shape[dim + 1:])
    shape[dim] *= repeats
    return y.reshape(shape)


for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.__module__ = "spore"


class Parameter(Tensor):
    """A trainable tensor with a name (MindSpore's Parameter). It shares its memory with the C++
    parameter slot it is registered in, so optimizers and checkpoints see the same data."""

    def __init__(self, default_input, name=None, requires_grad=True, layerwise_parallel=False,
                 parallel_optimizer=True):
        _refuse("Parameter",
                "Spore's parallel modes decide how parameters are cut and which ones the parallel optimizer "
                "shards (all of them)", layerwise_parallel=(layerwise_parallel, False),
                parallel_optimizer=(parallel_optimizer, True))
        from .initializer import Initializer
        if isinstance(default_input, Initializer):
            raise ValueError("Parameter(Initializer): give the shape through initializer(init, shape, dtype)")
        t = default_input if isinstance(default_input, Tensor) else Tensor(default_input)
        if not t.is_leaf():
            t = t.detach()
        Tensor.__init__(self, t)
        self.name = name if name is not None else "Parameter"
        self._user_named = name is not None
        if requires_grad and not self.dtype.is_floating_point:
            requires_grad = False
        self.requires_grad = requires_grad
        self.layerwise_parallel = layerwise_parallel
        self.parallel_optimizer = parallel_optimizer

    @property
    def data(self):
        return self

    def set_data(self, data, slice_shape=False):
        """Copies `data` into this parameter in place (shapes must match)."""
        _refuse("Parameter.set_data", "Spore's parameters are whole tensors (nn.Dense.shard cuts them)",
                slice_shape=(slice_shape, False))
        v = data if isinstance(data, Tensor) else Tensor(data)
        if tuple(v.shape) != tuple(self.shape):
            raise ValueError(f"Parameter {self.name}: set_data expected shape {tuple(self.shape)}, got "
                             f"{tuple(v.shape)}")
        self.assign_value(v)
        return self

    def value(self):
        return self

    def clone(self, init="same"):
        """A copy; init="same" copies the values, an initializer name ("zeros", "normal", ...) or
        Initializer gives fresh values of this shape and dtype."""
        if isinstance(init, str) and init == "same":
            data = Tensor.clone(self)
        else:
            from .initializer import initializer
            data = initializer(init, tuple(self.shape), self.dtype)
        return Parameter(data, name=self.name, requires_grad=self.requires_grad)

    def __repr__(self):
        return f"Parameter (name={self.name}, shape={tuple(self.shape)}, dtype={self.dtype!r}, " \
               f"requires_grad={self.requires_grad})"

    def __reduce__(self):
        return (Parameter, (np.array(self.asnumpy()), self.name, self.requires_grad))


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore's ParameterTuple)."""

    def __new__(cls, iterable):
        items = tuple(iterable)
        for p in items:
            if not isinstance(p, Tensor):
                raise TypeError(f"ParameterTuple holds Parameters, got {type(p).__name__}")
        return tuple.__new__(cls, items)

    def clone(self, prefix, init="same"):
        out = []
        for p in self:
            c = Parameter.clone(p, init) if isinstance(p, Parameter) else Parameter(Tensor.clone(p))
            c.name, c.requires_grad = f"{prefix}.{getattr(p, 'name', 'Parameter')}", False
            out.append(c)
        return ParameterTuple(out)


def as_parameter(t, name):
    """A Parameter object sharing `t`'s tensor (how C++-registered parameters reach Python)."""
    if isinstance(t, Parameter):
        p = t
    else:
        p = Parameter.__new__(Parameter)
        Tensor.__init__(p, t)
        p._user_named = False
        p.layerwise_parallel = False
        p.parallel_optimizer = True
    p.name = name
    return p
