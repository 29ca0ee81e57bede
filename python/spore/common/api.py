"""GRAPH_MODE for Python code: ms.jit, and the compiled calls of Cells and value_and_grad.

A call is traced through the C++ tracer (spore::jit): the Python function runs once per input
signature with symbolic tensors, every op it calls reaches C++ and is recorded, so Python control
flow is unrolled and the whole function (forward, gradients, optimizer updates) becomes one graph
that the C++ passes optimise; later calls with the same signature run the compiled graph without
Python. Non-tensor arguments (numbers, strings, cells) are part of the signature.
"""
import functools
import weakref

from .. import _C
from .._tracing import annotate
from .tensor import Tensor

GRAPH_MODE = 0

# What a trace in progress met that its cache key must cover: the cells called at the top of the
# traced function (their train flags and amp policies) and the optimizers it stepped.
_recording = []


def record_cell(cell):
    if _recording:
        _recording[-1].setdefault("cells", {})[id(cell)] = cell


def record_optimizer(opt):
    if _recording:
        _recording[-1].setdefault("optimizers", {})[id(opt)] = opt


def is_graph_mode():
    return _C.get_mode() == GRAPH_MODE


# ---- flattening arguments and results ------------------------------------------------------------
class _Leaf:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def flatten(obj, tensors):
    """Replaces every Tensor in a nest of tuples / lists / dicts by a _Leaf; appends it to tensors."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return _Leaf(len(tensors) - 1)
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(flatten(o, tensors) for o in obj)
    if isinstance(obj, list):
        return [flatten(o, tensors) for o in obj]
    if isinstance(obj, dict):
        return {k: flatten(v, tensors) for k, v in obj.items()}
    return obj


def unflatten(spec, tensors):
    if isinstance(spec, _Leaf):
        return tensors[spec.i]
    if isinstance(spec, tuple):
        return tuple(unflatten(s, tensors) for s in spec)
    if isinstance(spec, list):
        return [unflatten(s, tensors) for s in spec]
    if isinstance(spec, dict):
        return {k: unflatten(v, tensors) for k, v in spec.items()}
    return spec


def _static_key(spec):
    """The non-tensor part of the arguments as a string (values of plain data, ids of objects)."""
    if isinstance(spec, _Leaf):
        return "T"
    if isinstance(spec, (tuple, list)):
        return "(" + ",".join(_static_key(s) for s in spec) + ")"
    if isinstance(spec, dict):
        return "{" + ",".join(f"{k}:{_static_key(v)}" for k, v in sorted(spec.items())) + "}"
    if spec is None or isinstance(spec, (bool, int, float, str, bytes)):
        return repr(spec)
    if isinstance(spec, _C.DType):
        return repr(spec)
    return f"<{type(spec).__name__}@{id(spec):x}>"


class GraphCache:
    """Compiled versions of fn(*args, **kwargs), one per signature. `state` returns the part of the
    key that lives outside the arguments (e.g. a cell's train flags)."""

    def __init__(self, fn, name, state=None):
        self.fn = fn
        self.name = name
        self.state = state
        self._jits = {}  # state key -> (_C.JitFunction, {(sig, static): output spec})
        self._pending = None
        self._cells = {}
        self._optimizers = {}
        ref = weakref.ref(self)  # the C++ side must not keep this object alive

        def traced(sym):
            me = ref()
            return me._trace(sym)

        self._traced = traced

    def _state_key(self):
        parts = [self.state() if self.state else ""]
        for c in self._cells.values():
            parts.append(c._cpp.trace_key())
        for o in self._optimizers.values():
            parts.append(o._state_key())
        return "|".join(parts)

    def _trace(self, sym):
        spec, static, sig, outs_spec_store = self._pending
        args, kwargs = unflatten(spec, sym)
        rec = {}
        _recording.append(rec)
        try:
            out = self.fn(*args, **kwargs)
        except Exception as e:  # name the user's line
            raise annotate(e)
        finally:
            _recording.pop()
        self._cells.update(rec.get("cells", {}))
        self._optimizers.update(rec.get("optimizers", {}))
        flat = []
        out_spec = flatten(out, flat)
        outs_spec_store[(sig, static)] = out_spec
        return [t for t in flat]

    def __call__(self, args, kwargs):
        flat = []
        spec = flatten((tuple(args), dict(kwargs)), flat)
        static = _static_key(spec)
        flat = [t if t.is_contiguous() else t.contiguous() for t in flat]
        sig = tuple((tuple(t.shape), t.dtype) for t in flat)
        sk = self._state_key()
        entry = self._jits.get(sk)
        if entry is None:
            entry = (_C.JitFunction(self._traced, self.name, lambda: static_box[0], 16), {})
            self._jits[sk] = entry
        jf, specs = entry
        static_box[0] = static
        steps = [(o, o._opt.global_step) for o in self._optimizers.values()]
        for o, _ in steps:
            o._opt.write_hyper()
        self._pending = (spec, static, sig, specs)
        try:
            outs = jf(flat)
        finally:
            self._pending = None
        for o, s in steps:
            o._opt.global_step = s + 1  # a trace advanced it once; a cached run did not
        sk2 = self._state_key()
        if sk2 != sk:  # the trace met cells / optimizers: key the compiled graphs by them too
            self._jits.pop(sk, None)
            self._jits[sk2] = entry
        return unflatten(specs[(sig, static)], outs)


static_box = [""]  # the running call's static key (one trace runs at a time)


class _JitFunction:
    """@ms.jit: the function runs compiled in both modes (MindSpore compiles jit functions in
    PyNative mode too). Calls made while another graph is traced are inlined into it, and so are
    calls inside a PyNative value_and_grad / grad (the tape needs the ops)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._cache = GraphCache(fn, getattr(fn, "__name__", "jit"))

    def __call__(self, *args, **kwargs):
        from ..nn import cell  # (nn imports this module)
        # Inside a PyNative value_and_grad the function runs as written, as a Cell does there: a
        # compiled call records no tape, so its gradients would be zeros.
        if _C.is_tracing() or cell._grad_depth[0] > 0:
            return self._fn(*args, **kwargs)
        return self._cache(args, kwargs)

    def __get__(self, obj, objtype=None):  # @ms.jit on a method
        if obj is None:
            return self
        bound = obj.__dict__.get("_jit_bound_" + self._fn.__name__)
        if bound is None:
            bound = _JitFunction(self._fn.__get__(obj, objtype))
            obj.__dict__["_jit_bound_" + self._fn.__name__] = bound
        return bound


def jit(function=None, *, capture_mode="ast", jit_level=None, dynamic=0, fullgraph=False, backend="", **kwargs):
    """Compiles a Python function (or method) as one graph: @ms.jit / ms.jit(fn). capture_mode
    "ast" / "bytecode" / "trace" all trace the Python code as it runs (Spore's one way); the other
    options have no counterpart and are refused when not at their defaults."""
    from .._args import refuse, refuse_kwargs
    refuse("jit", "Spore traces the function as it runs, one way", 
           capture_mode=(capture_mode, ("ast", "bytecode", "trace")),
           jit_level=(jit_level, (None, "O0", "O1")), dynamic=(dynamic, (0, False)), fullgraph=(fullgraph, False),
           backend=(backend, ("", "ms_backend")))
    refuse_kwargs("jit", kwargs)
    if function is None:
        return lambda f: _JitFunction(f)
    return _JitFunction(function)


ms_function = jit
