"""ms.export / ms.load / nn.GraphCell over Spore's compiled model file (spore/deploy.h, docs/deploy.md).

file_format="MINDIR" writes Spore's compiled model file (the optimised graph after every Graph-mode pass
and the weights in the kernels' layout, magic "SPOREMDL"), named with MindSpore's ".mindir" suffix; it is
Spore's own format, which MindSpore's load cannot read (nor Spore MindSpore's protobuf MindIR).
file_format="ONNX" goes through the ONNX exporter (opset 17). The same file runs from `spore infer`, from
C (spore/spore_c.h) and from `nn.GraphCell(ms.load(file))`.
"""
import os

from .. import _C
from .._args import refuse_kwargs
from ..common.tensor import Tensor


def _suffixed(file_name, suffix):
    path = os.fspath(file_name)
    return path if path.endswith(suffix) else path + suffix


def export(net, *inputs, file_name, file_format="MINDIR", **kwargs):
    """Compiles net's inference forward pass, traced on `inputs` (their shapes and dtypes; dim 0 is the
    batch), into file_name + ".mindir" (file_format="MINDIR") or file_name + ".onnx" ("ONNX").

    Spore extensions (keyword arguments): dynamic_batch=True (dim 0 of inputs and outputs may vary: other
    batches run as chunks of the compiled ones), batches=[...] (the batch sizes to compile a graph for;
    default: 1 and the inputs' batch), input_names / output_names. Returns the path written."""
    from ..nn.cell import Cell
    dynamic = kwargs.pop("dynamic_batch", True)
    batches = kwargs.pop("batches", None)
    input_names = list(kwargs.pop("input_names", []))
    output_names = list(kwargs.pop("output_names", []))
    refuse_kwargs("export", kwargs)
    if not isinstance(net, Cell):
        raise TypeError(f"For 'export', net must be an nn.Cell, but got {type(net).__name__}.")
    if not inputs or not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError("For 'export', inputs must be one or more Tensors shaped like the network's inputs "
                        "(their values are not used), e.g. ms.export(net, ms.Tensor(np.zeros((1, 1, 28, 28), "
                        "np.float32)), file_name='lenet', file_format='MINDIR').")
    fmt = str(file_format).upper()
    if fmt == "ONNX":
        if len(inputs) != 1:
            raise ValueError(f"For 'export' to ONNX, Spore's exporter takes one input; got {len(inputs)}.")
        path = _suffixed(file_name, ".onnx")
        was_training = net.training
        net.set_train(False)
        try:
            _C.export_onnx(net._cpp, inputs[0], path, dynamic)
        finally:
            net.set_train(was_training)
        return path
    if fmt != "MINDIR":
        raise ValueError(f"For 'export', file_format must be 'MINDIR' or 'ONNX', but got {file_format!r} "
                         "('AIR' needs Ascend's ATC, which Spore's compiled MINDIR file replaces).")
    path = _suffixed(file_name, ".mindir")
    # Compiled for where the network is (its parameters' device: a GPU network gives a GPU model,
    # whose weights load onto the GPU), with the example inputs moved there.
    params = list(net.get_parameters())
    if params and not params[0].device.startswith("CPU"):
        target = params[0].device.split(":")[0]
        inputs = tuple(t if t.device == params[0].device else t.move_to(target) for t in inputs)
    b = inputs[0].shape[0] if inputs[0].ndim else 1
    if batches is None:
        batches = sorted({1, b}) if dynamic else [b]
    if not input_names:
        input_names = ["input"] if len(inputs) == 1 else [f"input_{i}" for i in range(len(inputs))]

    def fn(args):
        out = net(*args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if not output_names:
            output_names.extend(["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))])
        return outs

    was_training = net.training
    net.set_train(False)
    try:
        with _C._NoGrad():
            model = _C.CompiledModel.from_function(fn, list(inputs), list(batches), bool(dynamic), input_names,
                                                   output_names, f"python:{type(net).__name__}")
    finally:
        net.set_train(was_training)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    model.save(path)
    return path


class Graph:
    """What ms.load returns: a compiled model (inputs, outputs, batches, summary()); run it with
    nn.GraphCell(graph)."""

    def __init__(self, model):
        self._model = model

    @property
    def inputs(self):
        return [(i.name, tuple(i.shape), i.dtype) for i in self._model.inputs]

    @property
    def outputs(self):
        return [(o.name, tuple(o.shape), o.dtype) for o in self._model.outputs]

    @property
    def batches(self):
        return list(self._model.batches)

    @property
    def device(self):
        """The target it was compiled for: "CPU", "GPU"."""
        return self._model.device

    def summary(self):
        return self._model.summary()

    def __repr__(self):
        return f"Graph(inputs={self.inputs}, outputs={self.outputs}, batches={self.batches})"


def load(file_name, **kwargs):
    """Reads a compiled model file written by ms.export(file_format="MINDIR") or `spore compile`."""
    for k in ("dec_key", "dec_mode", "obf_func"):
        v = kwargs.pop(k, None)
        if v not in (None, "AES-GCM"):
            raise ValueError(f"For 'load', {k} is not supported: Spore's model files are not encrypted or "
                             "obfuscated.")
    refuse_kwargs("load", kwargs)
    path = os.fspath(file_name)
    if not os.path.exists(path):
        raise ValueError(f"For 'load', the file {path!r} does not exist.")
    if not _C.is_model_file(path):
        raise ValueError(f"For 'load', {path!r} is not a Spore compiled model file (no SPOREMDL magic "
                         "number); write one with ms.export(net, x, file_name=..., file_format='MINDIR') or "
                         "`spore compile model.onnx`. MindSpore's protobuf MindIR files are not read.")
    return Graph(_C.CompiledModel.load(path))
