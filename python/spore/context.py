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

_settings = {"device_id": 0, "max_call_depth": 1000, "save_graphs": False, "jit_level": "O0"}

# The keys MindSpore 2.x's set_context takes. Those beyond mode / device_target / device_id are
# stored (get_context returns them) and have no effect here; any other key is an error, as in
# MindSpore, so a misspelt option is never silently ignored.
_MINDSPORE_KEYS = frozenset("""
    mode device_target device_id save_graphs save_graphs_path deterministic print_file_path
    max_device_memory variable_memory_max_size mempool_block_size pynative_synchronize
    enable_graph_kernel graph_kernel_flags max_call_depth enable_reduce_precision check_bprop
    enable_dump save_dump_path aoe_tune_mode aoe_config runtime_num_threads op_timeout
    memory_optimize_level jit_config jit_level jit_syntax_level ascend_config gpu_config
    inter_op_parallel_num disable_format_transform support_binary reserve_class_name_in_scope
    enable_compile_cache compile_cache_path debug_level env_config_path enable_auto_mixed_precision
    precompile_only enable_sparse auto_tune_mode grad_for_scalar enable_profiling profiling_options
    device_num parallel_mode
""".split())


def set_device(device_target, device_id=None):
    """Selects the device ("CPU"; "GPU" / "Ascend" raise naming what this build supports)."""
    _C.set_device(device_target, 0 if device_id is None else int(device_id))
    _settings["device_id"] = 0 if device_id is None else int(device_id)


def set_context(**kwargs):
    """MindSpore's set_context. Known keys: mode, device_target, device_id; others are stored and
    returned by get_context (MindSpore options such as save_graphs, max_call_depth, jit_config)."""
    unknown = sorted(k for k in kwargs if k not in _MINDSPORE_KEYS)
    if unknown:
        import difflib
        hints = [f"{k!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(k, _MINDSPORE_KEYS, 1))
                 else repr(k) for k in unknown]
        raise ValueError(f"For 'context.set_context', the keyword argument {', '.join(hints)} is not recognized; "
                         "MindSpore's set_context keys are mode, device_target, device_id, save_graphs, "
                         "max_call_depth, jit_config, ... (nothing was changed).")
    if "device_target" in kwargs:
        warnings.warn("For 'context.set_context', the parameter 'device_target' will be deprecated and removed "
                      "in a future version. Please use the api mindspore.set_device() instead.",
                      DeprecationWarning, stacklevel=2)
        set_device(kwargs.pop("device_target"), kwargs.pop("device_id", None))
    if "device_id" in kwargs:
        set_device(_C.current_device(), kwargs.pop("device_id"))
    if "mode" in kwargs:
        mode = kwargs.pop("mode")
        if mode not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError(f"For 'context.set_context', the argument 'mode' should be context.GRAPH_MODE (0) "
                             f"or context.PYNATIVE_MODE (1), but got {mode!r}.")
        _C.set_mode(mode)
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
                  "micro_batch_num": 0}


def set_auto_parallel_context(**kwargs):
    """MindSpore's set_auto_parallel_context: parallel_mode ("stand_alone", "data_parallel" or
    "semi_auto_parallel": the layers' shard() strategies cut them over the ranks), gradients_mean,
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
                                 int(new["micro_batch_num"]))
    _AUTO_PARALLEL.update(new)


def reset_auto_parallel_context():
    _C.reset_auto_parallel_context()
    _AUTO_PARALLEL.update(parallel_mode=ParallelMode.STAND_ALONE, gradients_mean=False,
                          enable_parallel_optimizer=False, gradient_accumulation_steps=1,
                          dataset_strategy="data_parallel", full_batch=False, pipeline_stages=1,
                          micro_batch_num=0)


def get_auto_parallel_context(attr_key):
    if attr_key == "device_num":
        return _C.get_group_size()
    if attr_key == "global_rank":
        return _C.get_rank()
    return _AUTO_PARALLEL.get(attr_key)
