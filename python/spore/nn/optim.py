"""Optimizers (MindSpore's nn.Optimizer family) over the C++ ones (spore/optim): SGD, Momentum,
Adam, AdamWeightDecay (AdamW), RMSProp, Adagrad, Lamb. `optimizer(grads)` applies one update in place, with the
gradients in the order of `optimizer.parameters`.

Parameters are a list (e.g. net.trainable_params()) or MindSpore's group dicts:
    [{"params": decay_params, "weight_decay": 0.01}, {"params": other_params, "lr": 0.01},
     {"order_params": net.trainable_params()}]
Without groups, weight_decay applies to parameters whose names contain neither "beta" nor "gamma"
(MindSpore's default decay filter). learning_rate: a number, a list (one value per step), a
Tensor, or a LearningRateSchedule (nn.CosineDecayLR, ...) / Python callable of the step.
"""
from .. import _C
from ..common import api
from ..common.tensor import Parameter, ParameterTuple, Tensor
from .cell import Cell
from .._args import refuse, refuse_kwargs


def _default_decay(p):
    name = getattr(p, "name", "")
    return "beta" not in name and "gamma" not in name


def _lr_arg(lr):
    if isinstance(lr, Tensor):
        return lr
    return lr


class Optimizer(Cell):
    """Base class: builds the groups and holds the C++ optimizer (`_opt`)."""

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__(auto_prefix=False)
        params = list(parameters)
        if not params:
            raise ValueError(f"For '{type(self).__name__}', the argument 'params' must not be empty.")
        self.__dict__["_groups"] = self._make_groups(params, float(weight_decay))
        self.__dict__["learning_rate"] = learning_rate
        self.__dict__["weight_decay"] = weight_decay
        self.__dict__["loss_scale"] = loss_scale

    @staticmethod
    def _make_groups(params, weight_decay):
        if isinstance(params[0], dict):
            groups, order = [], None
            for g in params:
                if "order_params" in g:
                    order = list(g["order_params"])
                    continue
                ps = list(g["params"])
                wd = g.get("weight_decay")
                groups.append((ps, None if wd is None else float(wd), g.get("lr"), [p.name for p in ps]))
            if order is not None:  # MindSpore: the update order follows order_params
                where = {}
                for gi, (ps, *_r) in enumerate(groups):
                    for p in ps:
                        where[p._impl_id()] = gi
                regrouped = [([], g[1], g[2], []) for g in groups]
                for p in order:
                    gi = where.get(p._impl_id())
                    if gi is not None:
                        regrouped[gi][0].append(p)
                        regrouped[gi][3].append(p.name)
                groups = [g for g in regrouped if g[0]]
            return groups
        if weight_decay == 0.0:
            return [(params, None, None, [getattr(p, "name", f"p{i}") for i, p in enumerate(params)])]
        # Consecutive runs with the same decay flag, so the parameter order is kept.
        groups = []
        for i, p in enumerate(params):
            wd = weight_decay if _default_decay(p) else 0.0
            if not groups or groups[-1][1] != wd:
                groups.append(([], wd, None, []))
            groups[-1][0].append(p)
            groups[-1][3].append(getattr(p, "name", f"p{i}"))
        return groups

    def _build(self, opt):
        self.__dict__["_opt"] = opt
        by_id = {}
        for ps, *_r in self._groups:
            for p in ps:
                by_id[p._impl_id()] = p
        self.__dict__["parameters"] = ParameterTuple(by_id[t._impl_id()] for t in opt.parameters())

    def __call__(self, gradients):
        if _C.is_tracing():
            api.record_optimizer(self)
        self._opt.step(list(gradients))
        return True

    def construct(self, gradients):
        return self(gradients)

    def _state_key(self):
        """What a compiled step that calls this optimizer must be keyed on (see api.GraphCache)."""
        if self._opt.takes_hyper():
            return ""
        k = ",".join(str(self._opt.lr_of(i)) for i in range(len(self.parameters)))
        if self._opt.name() not in ("Momentum", "SGD"):
            k += f",step={self._opt.global_step}"
        return k

    def get_lr(self):
        return Tensor(self._opt.current_lr())

    def get_lr_parameter(self, param):
        ps = list(self.parameters)
        for i, p in enumerate(ps):
            if p is param or p._impl_id() == param._impl_id():
                return Tensor(self._opt.lr_of(i))
        raise ValueError(f"{getattr(param, 'name', param)} is not a parameter of this optimizer")

    def group_lr(self, group):
        """The learning rate of parameter group `group` at the current step."""
        return self._opt.group_lr(int(group))

    def set_group_lr(self, group, lr):
        """Sets a group's learning rate during training (PyTorch's param_groups[g]['lr'] = lr); a
        compiled (GRAPH_MODE) step reads it at run time, so nothing recompiles."""
        self._opt.set_group_lr(int(group), float(lr))

    @property
    def momentum_value(self):
        """The momentum coefficient (Momentum, SGD with momentum), or None."""
        return self._opt.momentum()

    def set_momentum(self, momentum):
        """Sets the momentum during training (a warm-up); read at run time like the lr."""
        self._opt.set_momentum(float(momentum))

    def set_clip_grad_norm(self, max_norm):
        """Clips the gradients' global 2-norm at max_norm inside every update (after loss-scale
        unscaling and accumulation, before weight decay), as torch.nn.utils.clip_grad_norm_ before
        optimizer.step() would; 0 or None turns it off. A Spore extension: in MindSpore one calls
        ops.clip_by_global_norm on the gradients in a custom step (that works here too). Set it
        before the first step: a compiled (GRAPH_MODE) step is traced with it."""
        v = 0.0 if max_norm is None else float(max_norm)
        if not v >= 0 or v == float("inf"):
            raise ValueError(f"set_clip_grad_norm: max_norm must be a finite number >= 0 (0 or None: no "
                             f"clipping), got {max_norm!r}")
        self._opt.set_clip_grad_norm(v)

    @property
    def clip_grad_norm(self):
        """The max norm set by set_clip_grad_norm (0: no clipping)."""
        return self._opt.clip_grad_norm()

    @property
    def global_step(self):
        return Tensor(self._opt.global_step)

    def state(self):
        """The optimizer's state tensors by name ("moments.conv1.weight", ...)."""
        return list(self._opt.state())

    def extend_repr(self):
        return f"learning_rate={self.learning_rate}"

    def __repr__(self):
        return f"{type(self).__name__}<{self.extend_repr()}>"


class SGD(Optimizer):
    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self._build(_C.SGD(self._groups, learning_rate, float(momentum), float(dampening), float(weight_decay),
                           bool(nesterov), float(loss_scale)))


class Momentum(Optimizer):
    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0, use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.__dict__["momentum"] = momentum
        self._build(_C.Momentum(self._groups, learning_rate, float(momentum), float(weight_decay),
                                bool(use_nesterov), float(loss_scale)))


class Adam(Optimizer):
    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
                 use_nesterov=False, weight_decay=0.0, loss_scale=1.0, use_amsgrad=False, **kwargs):
        refuse("nn.Adam", "Spore's updates are not locked (one step at a time)", use_locking=(use_locking, False))
        refuse_kwargs("nn.Adam", kwargs)
        if use_amsgrad or use_nesterov:
            raise NotImplementedError("Adam: use_amsgrad and use_nesterov are not supported")
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self._build(_C.Adam(self._groups, learning_rate, float(beta1), float(beta2), float(eps),
                            float(weight_decay), float(loss_scale)))


class AdamWeightDecay(Optimizer):
    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self._build(_C.AdamWeightDecay(self._groups, learning_rate, float(beta1), float(beta2), float(eps),
                                       float(weight_decay), 1.0))


AdamW = AdamWeightDecay


class RMSProp(Optimizer):
    def __init__(self, params, learning_rate=0.1, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
                 centered=False, loss_scale=1.0, weight_decay=0.0):
        refuse("nn.RMSProp", "Spore's updates are not locked (one step at a time)", use_locking=(use_locking, False))
        if centered:
            raise NotImplementedError("RMSProp: centered=True is not supported")
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self._build(_C.RMSProp(self._groups, learning_rate, float(decay), float(momentum), float(epsilon),
                               float(weight_decay), float(loss_scale)))


class Adagrad(Optimizer):
    """MindSpore's Adagrad (ApplyAdagrad): accum += g^2 (update_slots), p -= lr * g / sqrt(accum), with
    accum starting at `accum` and g including weight_decay * p."""

    def __init__(self, params, accum=0.1, learning_rate=0.001, update_slots=True, loss_scale=1.0, weight_decay=0.0):
        if not isinstance(update_slots, bool):
            raise TypeError(f"For 'Adagrad', the argument 'update_slots' must be a bool, but got "
                            f"{type(update_slots).__name__}.")
        if isinstance(accum, bool) or not isinstance(accum, (int, float)):
            raise TypeError(f"For 'Adagrad', the argument 'accum' must be a float, but got {type(accum).__name__}.")
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self._build(_C.Adagrad(self._groups, learning_rate, float(accum), update_slots, float(weight_decay),
                               float(loss_scale)))


class Lamb(Optimizer):
    """MindSpore's Lamb: Adam's bias-corrected moments, the step scaled per parameter by the trust ratio
    ||p|| / ||m^ / sqrt(v^ + eps) + weight_decay * p|| (1 when ||p|| or ||g|| is 0, clipped to [0, 10]).
    Without parameter groups the trust ratio uses weight_decay for every parameter, as MindSpore's does,
    while the update decays only those its filter keeps (names without "beta" / "gamma")."""

    def __init__(self, params, learning_rate, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        params = list(params)
        super().__init__(learning_rate, params, weight_decay)
        grouped = bool(params) and isinstance(params[0], dict)
        self._build(_C.Lamb(self._groups, learning_rate, float(beta1), float(beta2), float(eps),
                            float(weight_decay), None if grouped else float(weight_decay)))


# ---- learning-rate schedules (nn.*LR cells) and per-step lists (nn.*_lr) -------------------------
class LearningRateSchedule(Cell):
    """A learning rate as a function of the global step; `_schedule` is the C++ schedule."""

    def __init__(self, schedule):
        super().__init__()
        self.__dict__["_schedule"] = schedule

    def construct(self, global_step):
        return Tensor(self._schedule(int(global_step)))

    def __call__(self, global_step):
        return self.construct(global_step)


class ExponentialDecayLR(LearningRateSchedule):
    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__(_C.lr_exponential_decay(learning_rate, decay_rate, decay_steps, is_stair))


class NaturalExpDecayLR(LearningRateSchedule):
    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__(_C.lr_natural_exp_decay(learning_rate, decay_rate, decay_steps, is_stair))


class InverseDecayLR(LearningRateSchedule):
    def __init__(self, learning_rate, decay_rate, decay_steps, is_stair=False):
        super().__init__(_C.lr_inverse_decay(learning_rate, decay_rate, decay_steps, is_stair))


class CosineDecayLR(LearningRateSchedule):
    def __init__(self, min_lr, max_lr, decay_steps):
        super().__init__(_C.lr_cosine_decay(min_lr, max_lr, decay_steps))


class PolynomialDecayLR(LearningRateSchedule):
    def __init__(self, learning_rate, end_learning_rate, decay_steps, power, update_decay_steps=False):
        super().__init__(_C.lr_polynomial_decay(learning_rate, end_learning_rate, decay_steps, power,
                                                update_decay_steps))


class WarmUpLR(LearningRateSchedule):
    def __init__(self, learning_rate, warmup_steps):
        super().__init__(_C.lr_warmup(learning_rate, warmup_steps))


def piecewise_constant_lr(milestone, learning_rates):
    return _C.piecewise_constant_lr(list(milestone), [float(v) for v in learning_rates])


def exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    return _C.exponential_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair)


def natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    return _C.natural_exp_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair)


def inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair=False):
    return _C.inverse_decay_lr(learning_rate, decay_rate, total_step, step_per_epoch, decay_epoch, is_stair)


def cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch):
    return _C.cosine_decay_lr(min_lr, max_lr, total_step, step_per_epoch, decay_epoch)


def polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch, power,
                        update_decay_epoch=False):
    return _C.polynomial_decay_lr(learning_rate, end_learning_rate, total_step, step_per_epoch, decay_epoch, power,
                                  update_decay_epoch)


def warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch):
    return _C.warmup_lr(learning_rate, total_step, step_per_epoch, warmup_epoch)
