"""ops.Custom: an operator defined by the user, as MindSpore's, over Spore's C++ custom-op API
(spore/custom_op.h). Two kinds of kernel run on the CPU:

    # func_type="pyfunc": a Python function on numpy arrays, for prototyping
    square = ops.Custom(lambda x: x * x, out_shape=lambda s: s, out_dtype=lambda t: t,
                        func_type="pyfunc", bprop=lambda x, out, dout: (2 * x * dout,))
    # func_type="aot": a function compiled on its own into a shared library, with MindSpore's
    # entry point  extern "C" int CustomAdd(int nparam, void** params, int* ndims,
    #                                      int64_t** shapes, const char** dtypes, void*, void*)
    add = ops.Custom("./libadd.so:CustomAdd", out_shape=lambda a, b: a, out_dtype=lambda a, b: a,
                     func_type="aot")

out_shape / out_dtype are the infer functions (called with the inputs' shapes as lists, and
dtypes) or fixed values; None is the C++ API's default: the inputs' shapes broadcast, input 0's
dtype. bprop(*inputs, out, dout) returns one gradient per input (None: zeros), written with spore
ops so Graph mode traces it; without it, asking for a gradient through the op is an error naming
it. reg_info (CustomRegOp(...).get_op_info(), its dict or JSON) restricts the dtypes the op
accepts. Each distinct definition is registered once per number of inputs (the op table is
finite), and the op runs in PYNATIVE_MODE and in GRAPH_MODE (a node of the compiled graph; a
pyfunc kernel takes the GIL while it runs).
"""
import json
import os

import numpy as np

from .. import _C
from ..common.tensor import Tensor
from .operations import Primitive

FUNC_TYPES = ("pyfunc", "aot")
# MindSpore's other kernel languages need its compilers or its Ascend / GPU toolchains.
_OTHER_FUNC_TYPES = {
    "hybrid": "MindSpore's hybrid DSL is compiled by AKG",
    "akg": "AKG (MindSpore's kernel compiler) is not part of Spore",
    "tbe": "TBE kernels run on Ascend NPUs",
    "aicpu": "AICPU kernels run on Ascend NPUs",
    "julia": "Spore embeds no Julia runtime",
}
# Every dtype but bfloat16, which numpy has not.
_PYFUNC_DTYPES = ("bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64")
_ALL_DTYPES = _PYFUNC_DTYPES + ("bfloat16",)

_registry = {}  # definition -> {num_inputs: CustomOpHandle}; the key's objects stay alive here
_count = [0]


def _frozen(v):
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class DataType:
    """MindSpore's DataType constants for CustomRegOp.dtype_format: (dtype, format) pairs."""
    None_None = ("", "")
    BOOL_Default = ("bool", "DefaultFormat")
    U8_Default = ("uint8", "DefaultFormat")
    I8_Default = ("int8", "DefaultFormat")
    I32_Default = ("int32", "DefaultFormat")
    I64_Default = ("int64", "DefaultFormat")
    F16_Default = ("float16", "DefaultFormat")
    BF16_Default = ("bfloat16", "DefaultFormat")
    F32_Default = ("float32", "DefaultFormat")
    F64_Default = ("float64", "DefaultFormat")


class CustomRegOp:
    """MindSpore's registration info builder for ops.Custom's reg_info:
    CustomRegOp().input(0, "x").output(0, "y").dtype_format(DataType.F32_Default,
    DataType.F32_Default).target("CPU").get_op_info(). Spore reads the dtype rows (the op accepts
    those combinations only) and the target; attributes have no way into the kernel and are
    refused."""

    def __init__(self, op_name="Custom"):
        self._info = {"op_name": op_name, "inputs": [], "outputs": [], "dtype_format": [], "target": "CPU",
                      "attr": []}

    def input(self, index=None, name=None, param_type="required", **kwargs):
        self._info["inputs"].append(self._io("input", index, name, param_type, kwargs))
        return self

    def output(self, index=None, name=None, param_type="required", **kwargs):
        self._info["outputs"].append(self._io("output", index, name, param_type, kwargs))
        return self

    def _io(self, what, index, name, param_type, kwargs):
        if param_type != "required" or kwargs:
            raise NotImplementedError(f"For 'CustomRegOp.{what}', only required {what}s without options are "
                                      f"supported (param_type='required'), got param_type={param_type!r} "
                                      f"{kwargs or ''}")
        return {"index": index, "name": name, "param_type": param_type}

    def dtype_format(self, *args):
        self._info["dtype_format"].append([list(a) for a in args])
        return self

    def attr(self, name=None, param_type=None, value_type=None, default_value=None, **kwargs):
        raise NotImplementedError(f"For 'CustomRegOp.attr', attribute {name!r} cannot reach a Spore custom "
                                  f"kernel (the AOT entry point gets no AotExtra); pass the value as an input "
                                  f"tensor instead ({param_type}, {value_type}, {default_value}, {kwargs})")

    def target(self, target=None):
        self._info["target"] = target
        return self

    def get_op_info(self):
        return dict(self._info)


def _reg_rows(reg_info):
    """reg_info -> the accepted dtype rows (inputs then output), or None for any dtypes."""
    if reg_info is None:
        return None
    infos = reg_info if isinstance(reg_info, (list, tuple)) else [reg_info]
    rows = None
    for info in infos:
        if isinstance(info, str):
            try:
                info = json.loads(info)
            except ValueError as e:
                raise ValueError(f"For 'Custom', 'reg_info' given as a string must be JSON "
                                 f"(CustomRegOp(...).get_op_info()), got {info[:60]!r}: {e}") from None
        if not isinstance(info, dict):
            raise TypeError(f"For 'Custom', 'reg_info' must be CustomRegOp(...).get_op_info() (a dict), its JSON, "
                            f"or a list of them, got {type(info).__name__}")
        if info.get("target", "CPU") not in ("CPU", None):
            continue  # another device's registration: MindSpore picks the one of the device that runs
        if info.get("attr"):
            raise NotImplementedError("For 'Custom', reg_info attributes cannot reach a Spore custom kernel; "
                                      "pass the values as input tensors instead")
        for row in info.get("dtype_format", []):
            types = []
            for pair in row:
                dt, fmt = (pair[0], pair[1]) if isinstance(pair, (list, tuple)) else (pair, "DefaultFormat")
                if fmt not in ("DefaultFormat", "ND", ""):
                    raise NotImplementedError(f"For 'Custom', reg_info format {fmt!r} is not supported: Spore "
                                              f"tensors are dense row-major (DefaultFormat)")
                types.append(_C.dtype_from_any(dt).name)
            rows = (rows or []) + [tuple(types)]
    if rows is None:
        raise ValueError("For 'Custom', 'reg_info' has no dtype_format row for target 'CPU'; add "
                         ".dtype_format(...) rows (or .target('CPU')), or pass reg_info=None for any dtype")
    return rows


class Custom(Primitive):
    """ops.Custom(func, out_shape=None, out_dtype=None, func_type="hybrid", bprop=None, reg_info=None):
    func_type "pyfunc" (func: a Python function on numpy arrays) or "aot" (func: "path/lib.so:symbol");
    see the module's docstring. One output."""

    def __init__(self, func, out_shape=None, out_dtype=None, func_type="hybrid", bprop=None, reg_info=None):
        if func_type in _OTHER_FUNC_TYPES:
            raise NotImplementedError(
                f"For 'Custom', func_type={func_type!r} is not supported: {_OTHER_FUNC_TYPES[func_type]}. "
                f"Spore runs func_type='pyfunc' (a Python function on numpy arrays) and func_type='aot' (a "
                f"shared library's function, \"path/lib.so:func_name\")")
        if func_type not in FUNC_TYPES:
            raise ValueError(f"For 'Custom', func_type must be one of {FUNC_TYPES + tuple(_OTHER_FUNC_TYPES)}, got "
                             f"{func_type!r}")
        self._library = self._symbol = ""
        if func_type == "pyfunc":
            if not callable(func):
                raise TypeError(f"For 'Custom', func_type='pyfunc' needs a Python function, got "
                                f"{type(func).__name__}")
            name = getattr(func, "__name__", "pyfunc")
        else:
            if not isinstance(func, str) or ":" not in func:
                raise TypeError(f"For 'Custom', func_type='aot' needs func=\"path/to/lib.so:func_name\", got "
                                f"{func!r}")
            path, _, symbol = func.rpartition(":")
            if not path or not symbol:
                raise ValueError(f"For 'Custom', func {func!r} needs both the library path and the function "
                                 f"name: \"path/to/lib.so:func_name\"")
            self._library, self._symbol = os.path.abspath(path), symbol
            _C.check_aot_kernel(self._library, self._symbol)  # a missing file or symbol fails here
            name = symbol
        super().__init__(name)
        if bprop is not None and not callable(bprop):
            raise TypeError(f"For 'Custom', bprop must be a function (*inputs, out, dout) -> gradients, got "
                            f"{type(bprop).__name__}")
        if out_shape is not None and not callable(out_shape):
            self._check_shape(out_shape, "out_shape")
        if out_dtype is not None and not callable(out_dtype):
            _C.dtype_from_any(out_dtype)  # an unknown dtype fails here
        self.func, self.func_type, self.out_shape, self.out_dtype = func, func_type, out_shape, out_dtype
        self.bprop = bprop
        self._rows = _reg_rows(reg_info)
        self._key = (func_type, func, _frozen(out_shape), _frozen(out_dtype), bprop, _frozen(reg_info))
        self.add_prim_attr("func_type", func_type)

    # ---- the callbacks the C++ op calls -----------------------------------------------------------
    def _check_shape(self, s, what):
        if isinstance(s, (list, tuple)) and s and all(isinstance(x, (list, tuple)) for x in s):
            raise NotImplementedError(f"For 'Custom' ({self.name}), {what} "
                                      f"gives {len(s)} output shapes: Spore's custom ops have one output. Split "
                                      f"the function into one Custom op per output")
        if not isinstance(s, (list, tuple)) or not all(_is_int(x) and x >= 0 for x in s):
            raise ValueError(f"For 'Custom' ({self.name}), {what} must be a shape (a list or tuple of ints >= 0), "
                             f"got {s!r}")
        return tuple(int(x) for x in s)

    def _infer(self, shapes, dtypes):
        shapes = [list(s) for s in shapes]
        if self.out_shape is None:
            shape = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
        elif callable(self.out_shape):
            shape = self.out_shape(*shapes)
        else:
            shape = self.out_shape
        shape = self._check_shape(shape, "out_shape")
        if self.out_dtype is None:
            dtype = dtypes[0]
        else:
            dtype = self.out_dtype(*dtypes) if callable(self.out_dtype) else self.out_dtype
            try:
                dtype = _C.dtype_from_any(dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"For 'Custom' ({self.name}), out_dtype gave {dtype!r}, not a dtype: {e}") from None
        if self._rows is not None:
            got = tuple(t.name for t in list(dtypes) + [dtype])
            if got not in self._rows:
                raise TypeError(f"For 'Custom' ({self.name}), the inputs' and output's dtypes {got} match no "
                                f"dtype_format row of reg_info {self._rows}; cast the inputs or add a row")
        return shape, dtype

    def _kernel(self, *arrays):
        r = self.func(*arrays)
        if isinstance(r, Tensor):
            r = r.asnumpy()
        if isinstance(r, (tuple, list)) and r and all(isinstance(x, (np.ndarray, Tensor)) for x in r):
            raise NotImplementedError(f"For 'Custom' ({self.name}), the function returned {len(r)} arrays: Spore's "
                                      f"custom ops have one output")
        return np.ascontiguousarray(r)

    def _bprop(self, inputs, out, dout):
        if self.bprop is None:
            raise RuntimeError(f"For 'Custom' ({self.name}), a gradient through the op is needed but it has no "
                               f"bprop: pass bprop=fn(*inputs, out, dout) returning one gradient per input")
        g = self.bprop(*inputs, out, dout)
        if not isinstance(g, (tuple, list)):
            g = (g,)
        if len(g) != len(inputs):
            raise ValueError(f"For 'Custom' ({self.name}), bprop returned {len(g)} gradients for {len(inputs)} "
                             f"inputs; return one per input (None for no gradient)")
        grads = []
        for i, (x, gi) in enumerate(zip(inputs, g)):
            if gi is None:
                gi = _C.zeros(list(x.shape), x.dtype)
            elif not isinstance(gi, Tensor):
                gi = Tensor(np.asarray(gi, dtype=_C.dtype_to_nptype(x.dtype)))
            if tuple(gi.shape) != tuple(x.shape):
                raise ValueError(f"For 'Custom' ({self.name}), bprop's gradient {i} has shape {tuple(gi.shape)} "
                                 f"but input {i} has shape {tuple(x.shape)}")
            grads.append(gi)
        return grads

    def _handle(self, n):
        per_arity = _registry.setdefault(self._key, {})
        h = per_arity.get(n)
        if h is None:
            _count[0] += 1
            dtypes = _ALL_DTYPES if self.func_type == "aot" else _PYFUNC_DTYPES
            h = _C.register_custom_op(f"Custom_{self.name}_{_count[0]}", n, self._infer,
                                      self._kernel if self.func_type == "pyfunc" else None, self._library,
                                      self._symbol, self._bprop, [_C.dtype_from_any(d) for d in dtypes])
            per_arity[n] = h
        return h

    def __call__(self, *inputs):
        if not inputs:
            raise ValueError(f"For 'Custom' ({self.name}), expected at least one input tensor")
        ts = [x if isinstance(x, Tensor) else Tensor(x) for x in inputs]
        for i, t in enumerate(ts):
            if not t.device.startswith("CPU"):
                raise NotImplementedError(
                    f"For 'Custom' ({self.name}), input {i} is on {t.device}: custom kernels run on the CPU (pyfunc "
                    f"on numpy arrays, aot a CPU library's function); move the inputs to the CPU first")
            if self.func_type == "pyfunc" and t.dtype == _C.DType.bfloat16:
                raise TypeError(f"For 'Custom' ({self.name}), input {i} is bfloat16, which numpy (the pyfunc "
                                f"kernel's arrays) has not; cast it to float32 first")
        return self._handle(len(ts))(ts)
