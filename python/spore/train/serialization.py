"""Checkpoints: ms.save_checkpoint / ms.load_checkpoint / ms.load_param_into_net over the C++
writer and reader (spore/io/checkpoint.h). save_checkpoint writes safetensors by default whatever
the extension (a ".ckpt" name is kept as given), or MindSpore's protobuf .ckpt with format="ckpt";
load_checkpoint reads either, told apart by content. Names are MindSpore's dotted parameter names."""
import os

from .. import _C
from ..common.tensor import Parameter, Tensor, as_parameter
from .._args import refuse, refuse_kwargs


def _named_tensors(save_obj):
    from ..nn.cell import Cell
    from ..nn.optim import Optimizer
    if isinstance(save_obj, Cell):
        out = [(n, t) for n, t in save_obj._cpp.parameters_and_buffers()]
        for c in save_obj._walk_python():  # optimizers held by the cell (a training cell)
            for v in list(c.__dict__.values()):
                if isinstance(v, Optimizer):
                    out.extend(v.state())
        seen, uniq = set(), []
        for n, t in out:
            if n not in seen:
                seen.add(n)
                uniq.append((n, t))
        return uniq
    if isinstance(save_obj, dict):
        return [(k, v if isinstance(v, Tensor) else Tensor(v)) for k, v in save_obj.items()]
    out = []
    for item in save_obj:
        if isinstance(item, dict):
            out.append((item["name"], item["data"] if isinstance(item["data"], Tensor) else Tensor(item["data"])))
        elif isinstance(item, Parameter):
            out.append((item.name, item))
        else:
            name, data = item
            out.append((name, data if isinstance(data, Tensor) else Tensor(data)))
    return out


def save_checkpoint(save_obj, ckpt_file_name, integrated_save=True, async_save=False, append_dict=None,
                    enc_key=None, enc_mode="AES-GCM", choice_func=None, format="safetensors", **kwargs):
    """Saves a Cell's parameters and buffers (or a list of {"name", "data"} / Parameters, or a dict)."""
    refuse("save_checkpoint", "Spore writes whole, synchronous, unencrypted safetensors files",
           integrated_save=(integrated_save, True), async_save=(async_save, False), enc_key=(enc_key, None),
           enc_mode=(enc_mode, "AES-GCM"))
    refuse_kwargs("save_checkpoint", kwargs)
    tensors = _named_tensors(save_obj)
    if choice_func is not None:
        tensors = [(n, t) for n, t in tensors if choice_func(n)]
    meta = {str(k): str(v) for k, v in (append_dict or {}).items()}
    path = os.fspath(ckpt_file_name)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    if format not in ("safetensors", "ckpt"):
        raise ValueError(f"For 'save_checkpoint', the format must be 'safetensors' or 'ckpt', but got {format}.")
    _C.save_checkpoint(tensors, path, meta, format)


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None, dec_key=None,
                    dec_mode="AES-GCM", specify_prefix=None, choice_func=None, format="safetensors"):
    """{name: Parameter}; with net, also loads them into it."""
    refuse("load_checkpoint", "Spore reads unencrypted safetensors files (whatever the extension)",
           dec_key=(dec_key, None), dec_mode=(dec_mode, "AES-GCM"), format=(format, ("ckpt", "safetensors")))
    tensors, meta = _C.load_checkpoint(os.fspath(ckpt_file_name))
    out = {}
    for name, t in tensors:
        if filter_prefix is not None:
            prefixes = (filter_prefix,) if isinstance(filter_prefix, str) else tuple(filter_prefix)
            if name.startswith(prefixes):
                continue
        if specify_prefix is not None:
            prefixes = (specify_prefix,) if isinstance(specify_prefix, str) else tuple(specify_prefix)
            if not name.startswith(prefixes):
                continue
        if choice_func is not None and not choice_func(name):
            continue
        out[name] = as_parameter(t, name)
    for k, v in meta.items():
        out.setdefault(k, v)
    if net is not None:
        load_param_into_net(net, {k: v for k, v in out.items() if isinstance(v, Tensor)}, strict_load)
    return out


def load_param_into_net(net, parameter_dict, strict_load=False, remove_redundancy=False):
    """Copies the values into the net's parameters in place. Returns (param_not_load, ckpt_not_load)."""
    refuse("load_param_into_net", "Spore's checkpoints hold every parameter", 
           remove_redundancy=(remove_redundancy, False))
    loaded = [(k, v) for k, v in parameter_dict.items() if isinstance(v, Tensor)]
    targets = net._cpp.parameters_and_buffers()
    from ..nn.optim import Optimizer
    for c in net._walk_python():
        for v in list(c.__dict__.values()):
            if isinstance(v, Optimizer):
                targets.extend(v.state())
    missing, unexpected, mismatched = _C.load_into_tensors(targets, loaded, strict_load)
    if mismatched:
        raise RuntimeError("load_param_into_net: shapes or dtypes do not match:\n" + "\n".join(mismatched))
    return list(missing), list(unexpected)
