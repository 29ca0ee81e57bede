"""Callbacks (mindspore.train.Callback family). Subclass Callback and override the hooks you need:
on_train_begin, on_train_epoch_begin, on_train_step_begin, on_train_step_end, on_train_epoch_end,
on_train_end, on_eval_begin, on_eval_epoch_begin, on_eval_step_begin, on_eval_step_end,
on_eval_epoch_end, on_eval_end (the 1.x names begin, epoch_begin, step_begin, step_end,
epoch_end, end work too). run_context.original_args() gives the callback parameters
(cur_epoch_num, cur_step_num, batch_num, net_outputs, ...); run_context.request_stop() ends
training after the current step.

Model's loop is C++: a Python callback is called through a C++ adapter, only for the hooks it
overrides. LossMonitor, TimeMonitor, ModelCheckpoint, History and EarlyStopping are the C++ ones.
"""
import time

from .. import _C
from ..common.tensor import Tensor
from .._args import refuse
from .._args import refuse, refuse_kwargs


class _CallbackParam:
    """MindSpore's cb_params, read from the C++ RunContext when asked (a hook that never calls
    original_args() costs no conversion)."""

    _FIELDS = {"cur_epoch_num": "epoch", "epoch_num": "epoch_num", "cur_step_num": "global_step",
               "batch_num": "steps_per_epoch", "cur_step_in_epoch": "step", "epoch_loss": "epoch_loss",
               "lr": "lr", "batch_size": "batch_size", "epoch_elapsed": "epoch_elapsed", "step_time": "step_time",
               "epoch_train_time": "epoch_train_time", "epoch_data_wait": "epoch_data_wait",
               "epoch_device_idle": "epoch_device_idle", "cur_eval_step": "eval_step"}

    def __init__(self, ctx, model, mode):
        self._ctx, self._model, self.mode = ctx, model, mode

    def __getattr__(self, name):
        ctx = self.__dict__["_ctx"]
        if name in _CallbackParam._FIELDS:
            return getattr(ctx, _CallbackParam._FIELDS[name])
        if name == "net_outputs":
            return Tensor(float(ctx.loss)) if ctx.loss == ctx.loss else None
        if name in ("metrics", "eval_results"):
            return dict(ctx.metrics)
        if name == "step_num":
            return ctx.steps_per_epoch * ctx.epoch_num
        model = self.__dict__["_model"]
        if model is not None:
            attrs = {"train_network": lambda: model.train_network, "network": lambda: model._network,
                     "optimizer": lambda: model._optimizer, "loss_fn": lambda: model._loss_fn,
                     "eval_network": lambda: model.eval_network}
            if name in attrs:
                return attrs[name]()
        raise AttributeError(f"cb_params has no attribute '{name}'")


class RunContext:
    """What a hook receives: original_args(), request_stop(), get_stop_requested()."""

    def __init__(self, ctx, model=None, mode="train"):
        self._ctx = ctx
        self._params = _CallbackParam(ctx, model, mode)

    def original_args(self):
        return self._params

    def request_stop(self):
        self._ctx.request_stop()

    def get_stop_requested(self):
        return self._ctx.stop_requested


class Callback:
    """Base class of Python callbacks. The new-style hooks call the 1.x-style ones by default."""

    def begin(self, run_context):
        pass

    def epoch_begin(self, run_context):
        pass

    def epoch_end(self, run_context):
        pass

    def step_begin(self, run_context):
        pass

    def step_end(self, run_context):
        pass

    def end(self, run_context):
        pass

    def on_train_begin(self, run_context):
        self.begin(run_context)

    def on_train_epoch_begin(self, run_context):
        self.epoch_begin(run_context)

    def on_train_epoch_end(self, run_context):
        self.epoch_end(run_context)

    def on_train_step_begin(self, run_context):
        self.step_begin(run_context)

    def on_train_step_end(self, run_context):
        self.step_end(run_context)

    def on_train_end(self, run_context):
        self.end(run_context)

    def on_eval_begin(self, run_context):
        pass

    def on_eval_epoch_begin(self, run_context):
        pass

    def on_eval_epoch_end(self, run_context):
        pass

    def on_eval_step_begin(self, run_context):
        pass

    def on_eval_step_end(self, run_context):
        pass

    def on_eval_end(self, run_context):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *err):
        pass

    _cpp = None  # the C++ callback of the built-in ones


# C++ hook -> the Python hooks it calls (a 1.x name is called when only it is overridden).
_HOOKS = {
    "on_train_begin": (("on_train_begin",), "train"),
    "on_epoch_begin": (("on_train_epoch_begin",), "train"),
    "on_step_begin": (("on_train_step_begin",), "train"),
    "on_step_end": (("on_train_step_end",), "train"),
    "on_epoch_end": (("on_train_epoch_end",), "train"),
    "on_train_end": (("on_train_end",), "train"),
    "on_eval_begin": (("on_eval_begin", "on_eval_epoch_begin"), "eval"),
    "on_eval_step_begin": (("on_eval_step_begin",), "eval"),
    "on_eval_step_end": (("on_eval_step_end",), "eval"),
    "on_eval_end": (("on_eval_epoch_end", "on_eval_end"), "eval"),
}
_CHAINED = {"on_train_begin": "begin", "on_train_epoch_begin": "epoch_begin", "on_train_step_begin": "step_begin",
            "on_train_step_end": "step_end", "on_train_epoch_end": "epoch_end", "on_train_end": "end"}


def _overrides(cb, name):
    return getattr(type(cb), name, None) is not getattr(Callback, name, None)


def _adapter(cb, model):
    """A C++ callback calling the Python hooks `cb` overrides (none: None)."""
    hooks = []
    for cpp_name in _C.CALLBACK_HOOKS:
        names, mode = _HOOKS[cpp_name]
        fns = []
        for n in names:
            if _overrides(cb, n):
                fns.append(getattr(cb, n))
            elif n in _CHAINED and _overrides(cb, _CHAINED[n]):
                fns.append(getattr(cb, _CHAINED[n]))
        if fns:
            def hook(ctx, fns=tuple(fns), mode=mode):
                rc = RunContext(ctx, model, mode)
                for f in fns:
                    f(rc)
            hooks.append(hook)
        else:
            hooks.append(None)
    if all(h is None for h in hooks):
        return None
    return _C.PyCallback(hooks)


def to_cpp(callbacks, model=None):
    """Python callbacks -> the C++ callback list Model runs."""
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    out = []
    for cb in callbacks:
        if isinstance(cb, CallbackList):
            out.extend(to_cpp(cb._list, model))
            continue
        if not isinstance(cb, Callback):
            raise TypeError(f"callbacks must be Callback instances, got {type(cb).__name__}")
        if cb._cpp is not None:
            out.append(cb._cpp)
        a = _adapter(cb, model)
        if a is not None:
            out.append(a)
    return out


class CallbackList(Callback):
    def __init__(self, callbacks):
        self._list = list(callbacks)


class LossMonitor(Callback):
    """Prints "epoch: 1 step: 10, loss is 0.2345" every per_print_times steps; stops on a NaN/inf loss."""

    def __init__(self, per_print_times=1):
        if not isinstance(per_print_times, int) or per_print_times < 0:
            raise ValueError(f"The argument 'per_print_times' must be int and >= 0, but got {per_print_times}")
        self._cpp = _C.LossMonitor(per_print_times)


class TimeMonitor(Callback):
    """Prints the epoch time and the per-step time at each epoch end."""

    def __init__(self, data_size=None, data_time=False):
        refuse("TimeMonitor", "Spore's TimeMonitor reads the step count from the run and times whole steps",
               data_time=(data_time, False))
        if data_size is not None and (not isinstance(data_size, int) or data_size <= 0):
            raise ValueError(f"For 'TimeMonitor', 'data_size' must be a positive int or None, got {data_size!r}")
        self._cpp = _C.TimeMonitor()


class CheckpointConfig:
    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 keep_checkpoint_per_n_minutes=0, integrated_save=True, async_save=False, saved_network=None,
                 append_info=None, enc_key=None, enc_mode="AES-GCM", exception_save=False, **kwargs):
        refuse("CheckpointConfig", "Spore saves every N steps / epochs, whole, synchronously and unencrypted",
               save_checkpoint_seconds=(save_checkpoint_seconds, 0),
               keep_checkpoint_per_n_minutes=(keep_checkpoint_per_n_minutes, 0),
               integrated_save=(integrated_save, True), async_save=(async_save, False), 
               saved_network=(saved_network, None),
               append_info=(append_info, None), enc_key=(enc_key, None), enc_mode=(enc_mode, "AES-GCM"),
               exception_save=(exception_save, False))
        refuse_kwargs("CheckpointConfig", kwargs, ("save_checkpoint_epochs",))
        self.save_checkpoint_steps = save_checkpoint_steps or 0
        self.keep_checkpoint_max = keep_checkpoint_max
        self.save_checkpoint_epochs = kwargs.get("save_checkpoint_epochs", 0)
        self._cpp = _C.CheckpointConfig(int(self.save_checkpoint_steps), int(self.save_checkpoint_epochs),
                                        int(keep_checkpoint_max), True, True)


class ModelCheckpoint(Callback):
    """Saves "<directory>/<prefix>-<epoch>_<step>.safetensors" (parameters and optimizer state)."""

    def __init__(self, prefix="CKP", directory=None, config=None):
        config = config or CheckpointConfig()
        self._cpp = _C.ModelCheckpoint(prefix, directory or "", config._cpp)

    @property
    def latest_ckpt_file_name(self):
        return self._cpp.latest_checkpoint()

    def saved_files(self):
        return self._cpp.saved_files()


class History(Callback):
    """Records the epoch losses and validation results: history.history["loss"], .epoch."""

    def __init__(self):
        self._cpp = _C.History()

    @property
    def epoch(self):
        return self._cpp.epochs()

    @property
    def history(self):
        return self._cpp.history()


class EarlyStopping(Callback):
    def __init__(self, monitor="eval_loss", min_delta=0, patience=0, verbose=False, mode="auto", baseline=None,
                 restore_best_weights=False):
        refuse("EarlyStopping", "Spore's EarlyStopping does not print; read stopped_epoch after training",
               verbose=(verbose, False))
        self._cpp = _C.EarlyStopping(monitor, patience, float(min_delta), mode, baseline, restore_best_weights)

    @property
    def stopped_epoch(self):
        return self._cpp.stopped_epoch()


class LambdaCallback(Callback):
    """Hooks as functions: LambdaCallback(on_train_epoch_end=lambda run_context: ...)."""

    def __init__(self, **hooks):
        for name, fn in hooks.items():
            if not hasattr(Callback, name):
                raise ValueError(f"LambdaCallback: unknown hook '{name}'")
            setattr(self, name, fn)


def _lambda_overrides(cb, name):
    return name in cb.__dict__


_base_overrides = _overrides


def _overrides(cb, name):  # noqa: F811  (LambdaCallback sets hooks per instance)
    return _lambda_overrides(cb, name) or _base_overrides(cb, name)


class ReduceLROnPlateau(Callback):
    """MindSpore's ReduceLROnPlateau: at each epoch end, reads `monitor` ("eval_loss" or another
    validation result of Model.fit, or "loss": the epoch's mean training loss, as EarlyStopping
    here); after `patience` epochs without an improvement larger than `min_delta`, multiplies every
    parameter group's learning rate by `factor` (never below `min_lr`), then waits `cooldown`
    epochs before counting again. mode "auto" maximizes monitors naming an accuracy ("acc"),
    minimizes the rest. The optimizer's learning rates must be fixed numbers (a schedule is refused,
    as MindSpore refuses a dynamic one); a compiled step reads the new rate without recompiling."""

    def __init__(self, monitor="eval_loss", factor=0.1, patience=10, verbose=False, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0):
        if not isinstance(monitor, str):
            raise TypeError(f"For 'ReduceLROnPlateau', 'monitor' must be a str, got {type(monitor).__name__}")
        if not 0 <= float(factor) < 1.0:
            raise ValueError(f"For 'ReduceLROnPlateau', 'factor' must be in [0, 1) (the rate is multiplied by it), "
                             f"got {factor}")
        for name, v in (("patience", patience), ("cooldown", cooldown)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"For 'ReduceLROnPlateau', '{name}' must be an int >= 0, got {v!r}")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"For 'ReduceLROnPlateau', 'mode' must be 'auto', 'min' or 'max', got {mode!r}")
        if float(min_lr) < 0:
            raise ValueError(f"For 'ReduceLROnPlateau', 'min_lr' must be >= 0, got {min_lr}")
        self.monitor, self.factor, self.patience, self.verbose = monitor, float(factor), patience, bool(verbose)
        self.mode, self.min_delta, self.cooldown, self.min_lr = mode, abs(float(min_delta)), cooldown, float(min_lr)
        self._maximize = mode == "max" or (mode == "auto" and "acc" in monitor)
        self.on_train_begin(None)

    def on_train_begin(self, run_context):
        self.best = -float("inf") if self._maximize else float("inf")
        self.wait = 0
        self.cooldown_counter = 0

    def _improved(self, v):
        return v > self.best + self.min_delta if self._maximize else v < self.best - self.min_delta

    @staticmethod
    def _fixed_lr_optimizer(cb):
        opt = cb.optimizer
        if opt is None:
            raise ValueError("For 'ReduceLROnPlateau', the model has no optimizer")
        lr = opt.learning_rate
        fixed = isinstance(lr, (int, float)) or (isinstance(lr, Tensor) and lr.ndim == 0)
        groups_fixed = all(g[2] is None or isinstance(g[2], (int, float)) for g in opt._groups)
        if not (fixed and groups_fixed):
            raise ValueError("For 'ReduceLROnPlateau', the optimizer's learning rate must be a fixed number "
                             f"(got {type(lr).__name__}); it does not combine with a dynamic learning rate "
                             "(a list, a LearningRateSchedule or a function of the step): use one or the other")
        return opt

    def on_train_epoch_end(self, run_context):
        cb = run_context.original_args()
        opt = self._fixed_lr_optimizer(cb)
        if self.monitor == "loss":
            value = cb.epoch_loss
        else:
            results = cb.eval_results
            if not results:
                return  # no validation this epoch
            if self.monitor not in results:
                raise ValueError(f"For 'ReduceLROnPlateau', monitor {self.monitor!r} is not among the available "
                                 f"values: {', '.join(repr(k) for k in ['loss', *results])}")
            value = results[self.monitor]
        value = float(value)
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self._improved(value):
            self.best = value
            self.wait = 0
            return
        if self.cooldown_counter > 0:
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        reduced = False
        for g in range(opt._opt.num_groups()):
            cur = opt._opt.group_lr(g)
            if cur > self.min_lr:
                new = max(cur * self.factor, self.min_lr)
                opt._opt.set_group_lr(g, new)
                reduced = True
                if self.verbose:
                    print(f"Epoch {cb.cur_epoch_num:05d}: ReduceLROnPlateau reducing learning rate"
                          f"{'' if opt._opt.num_groups() == 1 else f' of group {g}'} to {new}.", flush=True)
        if reduced:
            self.cooldown_counter = self.cooldown
            self.wait = 0


class _StepTimer(Callback):
    """Used by tests and benchmarks: wall time per step."""

    def __init__(self):
        self.times = []

    def on_train_step_begin(self, run_context):
        self._t = time.perf_counter()

    def on_train_step_end(self, run_context):
        self.times.append(time.perf_counter() - self._t)
