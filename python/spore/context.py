"""MindSpore's context: execution mode, device, seed. ``ms.set_context(mode=ms.GRAPH_MODE)``,
``ms.set_device("CPU")``, ``ms.get_context("device_target")``.

GRAPH_MODE (0): a Cell's ``construct`` (or a ``@ms.jit`` function) is traced into one graph through
the C++ tracer and compiled; PYNATIVE_MODE (1, the default as in MindSpore 2.x): ops run as they
are called, with the autograd tape.
"""
import warnings

from . import _C

GRAPH_MODE = 0
PYNATIVE_MODE = 1

_settings = {"device_id": 0, "max_call_depth": 1000, "save_graphs": False, "save_graphs_path": "./graphs",
             "jit_level": "O0"}

# MindSpore 2.x's set_context keys, in three groups; any other key is an error, as in MindSpore, so a
# misspelt option is never silently ignored. get_context returns what was set.
#  1. honoured: mode, device_target, device_id, save_graphs, save_graphs_path, runtime_num_threads.
_HONOURED = frozenset("mode device_target device_id save_graphs save_graphs_path runtime_num_threads".split())
#  2. options that cannot change a result on Spore's devices (they tune Ascend hardware, MindSpore's
#     own compiler or its runtime): accepted; a value other than MindSpore's default warns, naming
#     what Spore does instead.
_NO_EFFECT = {
    "max_call_depth": "Spore's tracer inlines every call, so there is no call-depth limit to raise",
    "jit_level": "Spore runs its one pass pipeline (docs/graph.md) at every level",
    "jit_config": "Spore runs its one pass pipeline (docs/graph.md) at every level",
    "jit_syntax_level": "Spore traces the Python code as it runs, so every syntax level is accepted",
    "memory_optimize_level": "Spore's Graph mode always plans memory (liveness-based reuse)",
    "enable_compile_cache": "Spore compiles in-process and caches graphs by input signature",
    "compile_cache_path": "Spore compiles in-process and caches graphs by input signature",
    "reserve_class_name_in_scope": "Spore's IR names nodes by op",
    "debug_level": "Spore reports errors with the same detail at every level",
    "inter_op_parallel_num": "Spore's executor runs one op at a time with parallel kernels",
    "pynative_synchronize": "Spore reports a PyNative error at the op that raised it",
    "max_device_memory": "Spore's allocators take device memory as needed",
    "mempool_block_size": "Spore's allocators take device memory as needed",
    "variable_memory_max_size": "an Ascend memory option",
    "ascend_config": "an Ascend option (Spore has no Ascend backend)",
    "aoe_tune_mode": "an Ascend option (Spore has no Ascend backend)",
    "aoe_config": "an Ascend option (Spore has no Ascend backend)",
    "op_timeout": "an Ascend option (Spore has no Ascend backend)",
    "disable_format_transform": "an Ascend option (Spore has no Ascend backend)",
    "support_binary": "an Ascend option (Spore has no Ascend backend)",
    "enable_reduce_precision": "an Ascend option (Spore has no Ascend backend)",
    "auto_tune_mode": "an Ascend option (Spore has no Ascend backend)",
    "gpu_config": "cuDNN / matmul tuning; Spore picks its GPU algorithms itself",
    "env_config_path": "MindSpore's own logging configuration",
    "enable_sparse": "a MindSpore 1.x option without effect in 2.x",
    "grad_for_scalar": "Spore differentiates Tensor inputs only; scalars are constants",
}
#  3. options whose non-default value Spore cannot honour: refused, with what to do instead.
_REFUSED = {
    "deterministic": "Spore's CPU kernels are deterministic for a fixed kernel choice; set "
                     "SPORE_CONV_IMPL (docs/performance.md) to fix the convolution kernel across processes",
    "print_file_path": "ops.Print writes to stdout; redirect it",
    "enable_graph_kernel": "Spore's Graph mode always fuses (docs/graph.md); there is no separate kernel fuser",
    "graph_kernel_flags": "Spore's Graph mode always fuses (docs/graph.md); there is no separate kernel fuser",
    "check_bprop": "Spore checks custom gradients' shapes always",
    "enable_dump": "use save_graphs=True (the IR after every pass) or ms.Profiler (every op's time and shapes)",
    "save_dump_path": "use save_graphs=True with save_graphs_path",
    "precompile_only": "Spore compiles a graph on its first call; call it to compile",
    "enable_auto_mixed_precision": "use ms.amp.auto_mixed_precision(net, 'O2') or Model(amp_level=...)",
    "enable_profiling": "use ms.Profiler(output_path=...) and profiler.analyse()",
    "profiling_options": "use ms.Profiler(output_path=...) and profiler.analyse()",
    "device_num": "the number of devices is what the machine has (get_context('device_num')); the number of "
                  "ranks of a parallel job is set_auto_parallel_context(device_num=...), under mpirun",
    "parallel_mode": "use ms.set_auto_parallel_context(parallel_mode=...)",
}
# MindSpore's defaults: passing one is always accepted (nothing to do).
_DEFAULTS = {
    "max_call_depth": 1000, "jit_level": "O0", "jit_config": None, "jit_syntax_level": None,
    "memory_optimize_level": "O0", "enable_compile_cache": False, "compile_cache_path": None,
    "reserve_class_name_in_scope": True, "debug_level": 0, "inter_op_parallel_num": 0,
    "pynative_synchronize": False, "max_device_memory": "1024GB", "mempool_block_size": "1GB",
    "variable_memory_max_size": "0", "ascend_config": None, "aoe_tune_mode": None, "aoe_config": None,
    "op_timeout": 1800, "disable_format_transform": False, "support_binary": False,
    "enable_reduce_precision": True, "auto_tune_mode": "NO_TUNE", "gpu_config": None, "env_config_path": None,
    "enable_sparse": False, "grad_for_scalar": False, "deterministic": "OFF", "print_file_path": None,
    "enable_graph_kernel": False, "graph_kernel_flags": None, "check_bprop": False, "enable_dump": False,
    "save_dump_path": ".", "precompile_only": False, "enable_auto_mixed_precision": False,
    "enable_profiling": False, "profiling_options": None, "device_num": None, "parallel_mode": None,
}
_MINDSPORE_KEYS = _HONOURED | frozenset(_NO_EFFECT) | frozenset(_REFUSED)


def set_device(device_target, device_id=None):
    """Selects the device ("CPU"; "GPU" / "Ascend" raise naming what this build supports)."""
    _C.set_device(device_target, 0 if device_id is None else int(device_id))
    _settings["device_id"] = 0 if device_id is None else int(device_id)


def _is_default(key, value):
    d = _DEFAULTS.get(key)
    return value == d or (d is None and value in ("", {}, None))


def set_context(**kwargs):
    """MindSpore's set_context. Honoured: mode, device_target, device_id, save_graphs (Graph mode
    writes its IR after every pass, a .dot of the final graph, into save_graphs_path),
    runtime_num_threads (the kernels' thread pool). Options that cannot change a result here are
    accepted (a non-default value warns, saying why); options Spore cannot honour are refused when
    given a non-default value. Nothing is changed when a key is refused."""
    unknown = sorted(k for k in kwargs if k not in _MINDSPORE_KEYS)
    if unknown:
        import difflib
        hints = [f"{k!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(k, _MINDSPORE_KEYS, 1))
                 else repr(k) for k in unknown]
        raise ValueError(f"For 'context.set_context', the keyword argument {', '.join(hints)} is not recognized; "
                         "MindSpore's set_context keys are mode, device_target, device_id, save_graphs, "
                         "max_call_depth, jit_config, ... (nothing was changed).")
    for k in sorted(kwargs):
        if k in _REFUSED and not _is_default(k, kwargs[k]):
            raise NotImplementedError(f"For 'context.set_context', {k}={kwargs[k]!r} is not supported by Spore: "
                                      f"{_REFUSED[k]} (nothing was changed).")
    if "save_graphs" in kwargs:
        sg = kwargs["save_graphs"]
        if isinstance(sg, bool) or (isinstance(sg, int) and 0 <= sg <= 3):
            pass
        else:
            raise ValueError(f"For 'context.set_context', 'save_graphs' must be a bool or an int in [0, 3], "
                             f"got {sg!r} (nothing was changed).")
    if "save_graphs_path" in kwargs and (not isinstance(kwargs["save_graphs_path"], str)
                                         or not kwargs["save_graphs_path"]):
        raise ValueError(f"For 'context.set_context', 'save_graphs_path' must be a non-empty folder path, "
                         f"got {kwargs['save_graphs_path']!r} (nothing was changed).")
    if "runtime_num_threads" in kwargs:
        n = kwargs["runtime_num_threads"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"For 'context.set_context', 'runtime_num_threads' must be an int >= 0 (0: all "
                             f"cores), got {n!r} (nothing was changed).")
    if "mode" in kwargs and kwargs["mode"] not in (GRAPH_MODE, PYNATIVE_MODE):
        raise ValueError(f"For 'context.set_context', the argument 'mode' should be context.GRAPH_MODE (0) "
                         f"or context.PYNATIVE_MODE (1), but got {kwargs['mode']!r}.")
    for k in sorted(kwargs):
        if k in _NO_EFFECT and not _is_default(k, kwargs[k]):
            warnings.warn(f"For 'context.set_context', {k}={kwargs[k]!r} changes nothing in Spore: {_NO_EFFECT[k]}.",
                          UserWarning, stacklevel=2)
    if "device_target" in kwargs:
        warnings.warn("For 'context.set_context', the parameter 'device_target' will be deprecated and removed "
                      "in a future version. Please use the api mindspore.set_device() instead.",
                      DeprecationWarning, stacklevel=2)
        set_device(kwargs.pop("device_target"), kwargs.pop("device_id", None))
    if "device_id" in kwargs:
        set_device(_C.current_device(), kwargs.pop("device_id"))
    if "save_graphs" in kwargs or "save_graphs_path" in kwargs:
        on = kwargs.get("save_graphs", _settings["save_graphs"])
        path = kwargs.get("save_graphs_path")
        _C.set_save_graphs(bool(on), path)
    if "runtime_num_threads" in kwargs:
        _C.set_num_threads(kwargs["runtime_num_threads"])
    if "mode" in kwargs:
        _C.set_mode(kwargs.pop("mode"))
    _settings.update(kwargs)


def get_context(attr_key):
    """Current value of a context key: "mode", "device_target", "device_id", "device_num", ..."""
    if attr_key == "mode":
        return _C.get_mode()
    if attr_key == "device_target":
        return _C.current_device()
    if attr_key == "device_id":
        return _C.current_device_id()
    if attr_key == "device_num":
        return _C.device_count()
    if attr_key in _settings:
        return _settings[attr_key]
    raise ValueError(f"For 'context.get_context', the argument 'attr_key' {attr_key!r} is not supported; "
                     f"known keys: mode, device_target, device_id, device_num, {', '.join(sorted(_settings))}")


def set_seed(seed):
    """Seeds Spore's generator (initializers, random ops, dataset shuffles) and numpy's, as MindSpore."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"The argument 'seed' must be a non-negative int, but got {seed!r}.")
    _C.set_seed(seed)
    import numpy as np
    np.random.seed(seed % (2 ** 32))


def get_seed():
    return _C.get_seed()


class ParallelMode:
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"


_AUTO_PARALLEL = {"parallel_mode": ParallelMode.STAND_ALONE, "gradients_mean": False,
                  "enable_parallel_optimizer": False, "gradient_accumulation_steps": 1,
                  "dataset_strategy": "data_parallel", "full_batch": False, "pipeline_stages": 1,
                  "micro_batch_num": 0, "search_mode": "sharding_propagation"}


def set_auto_parallel_context(**kwargs):
    """MindSpore's set_auto_parallel_context: parallel_mode ("stand_alone", "data_parallel",
    "semi_auto_parallel": the layers' shard() strategies cut them over the ranks, or
    "auto_parallel": the layers without shard() get the strategy that moves the fewest bytes per
    step, searched on the first batch; search_mode "sharding_propagation", and MindSpore's other
    modes run the same search), gradients_mean,
    device_num (must equal the launched ranks), enable_parallel_optimizer (ZeRO-1 optimizer
    sharding), gradient_accumulation_steps, and for semi_auto_parallel dataset_strategy (one tuple
    per input, or "data_parallel") and full_batch, pipeline_stages (a SequentialCell's cells, each
    with its cell.pipeline_stage, run as a 1F1B pipeline; micro_batch_num micro-batches per step,
    0: twice the stages). Model reads them when built."""
    known = set(_AUTO_PARALLEL) | {"device_num", "global_rank"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise NotImplementedError(f"set_auto_parallel_context: {', '.join(unknown)} not supported yet; "
                                  f"supported: {', '.join(sorted(known))}")
    if "device_num" in kwargs and kwargs["device_num"] != _C.get_group_size():
        raise ValueError(f"set_auto_parallel_context: device_num={kwargs['device_num']} but this job has "
                         f"{_C.get_group_size()} rank(s); start it with `mpirun -n {kwargs['device_num']}` "
                         f"(and call spore.communication.init() first) or drop device_num")
    new = dict(_AUTO_PARALLEL)
    new.update({k: v for k, v in kwargs.items() if k in _AUTO_PARALLEL})
    ds = new["dataset_strategy"]
    ds = [] if ds == "data_parallel" else [[int(v) for v in entry] for entry in ds]
    _C.set_auto_parallel_context(str(new["parallel_mode"]), bool(new["gradients_mean"]),
                                 bool(new["enable_parallel_optimizer"]), int(new["gradient_accumulation_steps"]),
                                 ds, bool(new["full_batch"]), int(new["pipeline_stages"]),
                                 int(new["micro_batch_num"]), str(new["search_mode"]))
    _AUTO_PARALLEL.update(new)


def reset_auto_parallel_context():
    _C.reset_auto_parallel_context()
    _AUTO_PARALLEL.update(parallel_mode=ParallelMode.STAND_ALONE, gradients_mean=False,
                          enable_parallel_optimizer=False, gradient_accumulation_steps=1,
                          dataset_strategy="data_parallel", full_batch=False, pipeline_stages=1,
                          micro_batch_num=0, search_mode="sharding_propagation")


def get_auto_parallel_context(attr_key):
    if attr_key == "device_num":
        return _C.get_group_size()
    if attr_key == "global_rank":
        return _C.get_rank()
    return _AUTO_PARALLEL.get(attr_key)
