"""nn.Cell: MindSpore's module, subclassed in Python with __init__ + construct.

Every Cell owns one C++ nn::Cell (`_cpp`): for a Python subclass a PyCell, whose construct calls
back into this object's `construct` (so C++ code that calls the cell, such as WithLossCell,
TrainOneStepCell, Model or the Graph-mode tracer, runs the Python construct); for the built-in
layers the C++ layer itself. Assigning a Cell or a Parameter to an attribute registers it with the
C++ cell under that name, so trainable_params(), checkpoints and the optimizers see MindSpore's
dotted names ("conv1.weight").

Calls: PYNATIVE_MODE runs construct as written (ops record the autograd tape). GRAPH_MODE compiles
a top-level call: construct is traced once per input signature into one graph (Python control flow
is unrolled) and later calls run the compiled graph.
"""
from collections import OrderedDict

from .. import _C
from .._tracing import annotate
from ..common import api
from ..common.tensor import Parameter, Tensor, as_parameter
from .._args import refuse
from .._args import refuse, refuse_kwargs

_grad_depth = [0]  # > 0 inside value_and_grad / GradOperation in PyNative: no compiled calls
_trace_depth = [0]


class Cell:
    """Base class of networks. Subclass it, create sub-cells and Parameters in __init__ and write
    the computation in construct(*inputs)."""

    _multi_out = False  # built-in cells whose C++ forward returns several tensors

    def __init__(self, auto_prefix=True, flags=None, *, _cpp=None):
        d = self.__dict__
        if _cpp is not None and type(self).construct is not Cell.construct:
            raise TypeError(f"'{type(self).__name__}' overrides construct() of the built-in layer "
                            f"'{_cpp.cls_name()}', whose computation is C++; subclass nn.Cell and hold the "
                            f"layer as an attribute instead (self.layer = ...; construct calls self.layer(x))")
        d["_cells"] = OrderedDict()
        d["_params"] = OrderedDict()
        d["_builtin"] = _cpp is not None
        d["_cpp"] = _cpp if _cpp is not None else _C.PyCell(self, type(self).__name__)
        d["_graph"] = None
        d["_auto_prefix"] = auto_prefix
        d["cell_type"] = None
        d["requires_grad"] = None  # set_grad: None follows the ambient grad mode
        if flags:
            d.update(flags)

    def __del__(self):
        cpp = self.__dict__.get("_cpp")
        if cpp is not None and not self.__dict__.get("_builtin", True):
            cpp.release_owner()

    # ---- attributes: registration of sub-cells and parameters -------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_cells" not in d:
            raise AttributeError(f"For '{type(self).__name__}', call super().__init__() in __init__ before "
                                 f"assigning attribute '{name}'.")
        if isinstance(value, Cell):
            if name in d["_cells"]:
                if d["_cells"][name] is value:
                    return
                raise ValueError(f"For '{type(self).__name__}', the sub-cell '{name}' is already set; "
                                 f"replacing a registered sub-cell is not supported")
            d["_cpp"].register_cell(name, value._cpp)
            d["_cells"][name] = value
        elif isinstance(value, Parameter):
            if name in d["_params"] or d["_cpp"].has_parameter(name):
                d["_cpp"].set_parameter(name, value)
            else:
                d["_cpp"].register_parameter(name, value, value.requires_grad)
            if not value._user_named or value.name == "Parameter":
                value.name = name
            d["_params"][name] = value
        elif name in d["_params"] and isinstance(value, Tensor):  # re-assigning a parameter's data
            d["_cpp"].set_parameter(name, value)
            d["_params"][name] = as_parameter(value, name)
            value = d["_params"][name]
        object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        if "_cpp" not in d:
            raise AttributeError(name)
        if name in d["_params"]:
            return d["_params"][name]
        if d.get("_builtin"):
            try:
                p = as_parameter(d["_cpp"].parameter(name), name)
            except ValueError:
                try:
                    return d["_cpp"].buffer(name)
                except ValueError:
                    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'") from None
            d["_params"][name] = p
            return p
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._cells or name in self._params:
            raise AttributeError(f"cannot delete the registered sub-cell / parameter '{name}'")
        object.__delattr__(self, name)

    def _keep(self, name, cell):
        """Keeps a Python sub-cell that the C++ cell registered itself (wrappers)."""
        self.__dict__["_cells"][name] = cell
        self.__dict__[name] = cell

    def insert_child_to_cell(self, child_name, child_cell):
        setattr(self, child_name, child_cell)

    def insert_param_to_cell(self, param_name, param, check_name_contain_dot=True):
        if check_name_contain_dot and "." in param_name:
            raise KeyError(f"For '{type(self).__name__}.insert_param_to_cell', the parameter name {param_name!r} "
                           f"contains '.'; pass check_name_contain_dot=False to allow it")
        setattr(self, param_name, param)

    # ---- calls ------------------------------------------------------------------------------------
    def construct(self, *inputs, **kwargs):
        raise NotImplementedError(f"For '{type(self).__name__}', construct() is not defined; a Cell subclass "
                                  f"must implement construct(self, *inputs)")

    def __call__(self, *args, **kwargs):
        rg = self.__dict__.get("requires_grad")
        if rg is not None and _grad_depth[0] == 0 and not _C.is_tracing() and rg != _C.is_grad_enabled():
            with (_C._EnableGrad() if rg else _C._NoGrad()):  # set_grad: this forward's grad mode
                return self._call(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        cpp = self._cpp
        if self._builtin and not kwargs:
            if self._multi_out:
                out = cpp.forward(list(args))
                return out[0] if len(out) == 1 else tuple(out)
            if len(args) == 1:
                return cpp(args[0])
            if len(args) == 2:
                return cpp(args[0], args[1])
            out = cpp.forward(list(args))
            return out[0] if len(out) == 1 else tuple(out)
        if _C.is_tracing():
            if _trace_depth[0] == 0:
                api.record_cell(self)
            _trace_depth[0] += 1
            try:
                if cpp.is_recompute():  # Cell.recompute(): its forward nodes get a recompute scope
                    with _C.RecomputeScope():
                        return self._run_construct(args, kwargs)
                return self._run_construct(args, kwargs)
            finally:
                _trace_depth[0] -= 1
        if _C.get_mode() == api.GRAPH_MODE and _grad_depth[0] == 0:
            if self._graph is None:
                self.__dict__["_graph"] = api.GraphCache(self._run_construct_star, type(self).__name__,
                                                         state=cpp.trace_key)
            return self._graph(args, kwargs)
        return self._run_construct(args, kwargs)

    def _run_construct_star(self, *args, **kwargs):  # the traced body of a compiled call
        _trace_depth[0] += 1
        try:
            return self._run_construct(args, kwargs)
        finally:
            _trace_depth[0] -= 1

    def _run_construct(self, args, kwargs):
        if self._cpp.amp_policy() is not None:
            with _C._PolicyScope(self._cpp):
                return self.construct(*args, **kwargs)
        return self.construct(*args, **kwargs)

    def _construct_from_cpp(self, *args):
        """C++ calls the cell (inside WithLossCell, TrainOneStepCell, Model, a trace): the amp policy
        is already current."""
        if _C.is_tracing():
            _trace_depth[0] += 1
            try:
                return self.construct(*args)
            except Exception as e:
                raise annotate(e)
            finally:
                _trace_depth[0] -= 1
        return self.construct(*args)

    # ---- parameters -------------------------------------------------------------------------------
    def _python_params(self):
        """Parameter objects created in Python, by tensor identity (so the same objects come back)."""
        out = {}
        for cell in self._walk_python():
            for p in cell._params.values():
                out[p._impl_id()] = p
        return out

    def _walk_python(self):
        seen, stack = set(), [self]
        while stack:
            c = stack.pop()
            if id(c) in seen:
                continue
            seen.add(id(c))
            yield c
            stack.extend(c._cells.values())

    def parameters_and_names(self, name_prefix="", expand=True):
        """(dotted name, Parameter) for every parameter of the tree, in registration order, then
        the state the C++ cells keep as buffers (BatchNorm's moving_mean / moving_variance), as
        Parameters with requires_grad=False: MindSpore makes those Parameters too, so they are
        listed (and checkpointed) under the same names, and trainable_params() leaves them out."""
        known = self._python_params()
        for name, t in self._cpp.named_parameters(name_prefix):
            if not expand and "." in name[len(name_prefix):].lstrip("."):
                continue  # expand=False: this cell's own parameters only
            p = known.get(t._impl_id())
            yield name, as_parameter(p if p is not None else t, name)
        for name, t in self._cpp.named_buffers(name_prefix):
            if not expand and "." in name[len(name_prefix):].lstrip("."):
                continue
            p = as_parameter(t, name)
            p.requires_grad = False
            yield name, p

    def get_parameters(self, expand=True):
        for _, p in self.parameters_and_names(expand=expand):
            yield p

    def trainable_params(self, recurse=True):
        """recurse=False: this cell's own parameters only (not its sub-cells')."""
        return [p for _, p in self.parameters_and_names(expand=recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        return [p for _, p in self.parameters_and_names(expand=recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        return OrderedDict(self.parameters_and_names(expand=recurse))

    def buffers_and_names(self):
        return list(self._cpp.named_buffers(""))

    def update_parameters_name(self, prefix="", recurse=True):
        for name, p in self.parameters_and_names(expand=recurse):
            p.name = prefix + name

    def cells_and_names(self, cell=None, name_prefix=""):
        refuse("Cell.cells_and_names", "the walk starts at this cell", cell=(cell, None))
        for name, c in _named_cells(self, name_prefix):
            yield name, c

    def name_cells(self):
        return OrderedDict(self._cells)

    def cells(self):
        return list(self._cells.values())

    @property
    def pipeline_stage(self):
        """MindSpore's cell.pipeline_stage: the stage this cell runs on when pipeline_stages > 1."""
        return self._cpp.pipeline_stage

    @pipeline_stage.setter
    def pipeline_stage(self, stage):
        self._cpp.pipeline_stage = int(stage)

    def recompute(self, mode=True, **kwargs):
        """MindSpore's Cell.recompute(): in GRAPH_MODE this cell's activations are recomputed for the
        backward pass instead of kept (less memory, more compute); PYNATIVE_MODE ignores it. The
        parallel-communication options MindSpore takes (mp_comm_recompute ...) are accepted."""
        refuse_kwargs(f"{type(self).__name__}.recompute", kwargs,
                      ("mp_comm_recompute", "parallel_optimizer_comm_recompute", "recompute_slice_activation"))
        refuse(f"{type(self).__name__}.recompute",
               "Spore recomputes the cell's forward ops (its collectives are recomputed with them)",
               mp_comm_recompute=(kwargs.get("mp_comm_recompute", True), True),
               parallel_optimizer_comm_recompute=(kwargs.get("parallel_optimizer_comm_recompute", False), False),
               recompute_slice_activation=(kwargs.get("recompute_slice_activation", False), False))
        self._cpp.recompute(bool(mode))
        return self

    # ---- modes -----------------------------------------------------------------------------------
    @property
    def training(self):
        return self._cpp.training

    @training.setter
    def training(self, mode):
        self._cpp.set_train(bool(mode))

    def set_train(self, mode=True):
        self._cpp.set_train(mode)
        return self

    def set_grad(self, requires_grad=True):
        """MindSpore's Cell.set_grad: whether a PYNATIVE_MODE call of this cell builds what the
        backward pass needs. True: its forward records the autograd tape even inside a no-grad scope
        (ms._no_grad); False: its forward records nothing (an inference call: no tape, no saved
        activations; the outputs have requires_grad False). value_and_grad / grad / GradOperation
        differentiate the cell whatever the flag (MindSpore's grad transforms set it themselves),
        and a GRAPH_MODE call compiles only the forward unless a grad transform asks. Not called:
        the ambient grad mode decides (records while parameters require grad)."""
        if not isinstance(requires_grad, bool):
            raise TypeError(f"For '{type(self).__name__}.set_grad', 'requires_grad' must be a bool, "
                            f"got {type(requires_grad).__name__}")
        self.__dict__["requires_grad"] = requires_grad
        return self

    def to_float(self, dst_type):
        """This cell and its sub-cells compute in dst_type (mixed precision), as MindSpore's."""
        self._cpp.to_float(dst_type)
        return self

    def add_flags(self, **flags):
        self.__dict__.update(flags)
        return self

    def add_flags_recursive(self, **flags):
        for c in self._walk_python():
            c.add_flags(**flags)
        return self

    def set_boost(self, boost_type):
        refuse(f"{type(self).__name__}.set_boost", "Spore has no boost algorithms", boost_type=(boost_type, None))
        return self

    @property
    def cls_name(self):
        return type(self).__name__

    def extend_repr(self):
        return ""

    def __repr__(self):
        return self._cpp.str()

    def __getstate__(self):
        raise TypeError("Cells are not picklable; save their parameters with ms.save_checkpoint")


def _named_cells(cell, prefix):
    seen = set()

    def walk(c, name):
        if id(c) in seen:
            return
        seen.add(id(c))
        yield name, c
        for n, sub in c._cells.items():
            yield from walk(sub, f"{name}.{n}" if name else n)

    yield from walk(cell, prefix)


class CellList(Cell):
    """A list of cells, registered as "0", "1", ... (MindSpore's CellList)."""

    def __init__(self, args=None, **kwargs):
        refuse_kwargs("CellList", kwargs)
        super().__init__()
        self.__dict__["_list"] = []
        for c in args or []:
            self.append(c)

    def append(self, cell):
        setattr(self, str(len(self._list)), cell)
        self._list.append(cell)
        return self

    def extend(self, cells):
        for c in cells:
            self.append(c)
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return CellList(self._list[i])
        return self._list[i]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def construct(self, *inputs):
        raise NotImplementedError("CellList holds cells for a parent's construct; it has no construct")


class SequentialCell(Cell):
    """Runs its cells in order (MindSpore's SequentialCell); built from a list or an OrderedDict."""

    def __init__(self, *args):
        super().__init__()
        self.__dict__["_list"] = []
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if len(args) == 1 and isinstance(args[0], dict):
            for name, c in args[0].items():
                setattr(self, name, c)
                self._list.append(c)
        else:
            for c in args:
                self.append(c)

    def append(self, cell):
        setattr(self, str(len(self._list)), cell)
        self._list.append(cell)
        return self

    def __getitem__(self, i):
        return self._list[i]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def construct(self, x):
        for c in self._list:
            x = c(x)
        return x


class CppCell(Cell):
    """A C++ cell made by the library (amp.build_train_network, ...), as a Python Cell."""

    def __init__(self, cpp, keep=(), multi_out=False):
        super().__init__(_cpp=cpp)
        self.__dict__["_multi_out"] = multi_out
        for i, obj in enumerate(keep):  # Python objects the C++ cell uses
            self.__dict__[f"_keep{i}"] = obj


class GraphCell(Cell):
    """Runs a compiled graph from ms.load (MindSpore's nn.GraphCell): calling it runs the compiled model on
    its inputs (Tensors or numpy arrays) and returns its output (a tuple for several). The graph is
    already optimised and fixed: it runs the same in GRAPH and PYNATIVE mode, takes no gradients, and
    params_init is refused (the weights are in the file)."""

    def __init__(self, graph, params_init=None, obf_random_seed=None):
        super().__init__()
        if params_init is not None or obf_random_seed is not None:
            raise ValueError("For 'GraphCell', params_init and obf_random_seed are not supported: the compiled "
                             "file holds its weights, already folded and packed for the kernels.")
        from ..train.export import Graph
        if not isinstance(graph, Graph):
            raise TypeError(f"For 'GraphCell', graph must be what ms.load returns, but got "
                            f"{type(graph).__name__}.")
        self.__dict__["graph"] = graph

    def __call__(self, *inputs):
        from ..common.tensor import Tensor
        ts = [t if isinstance(t, Tensor) else Tensor(t) for t in inputs]
        if _C.is_tracing():
            raise RuntimeError("For 'GraphCell', the compiled graph cannot be called inside another traced "
                               "graph (ms.jit / a GRAPH_MODE construct); call it outside.")
        out = self.graph._model.run(ts)
        return out[0] if len(out) == 1 else tuple(out)

    def construct(self, *inputs):
        return self(*inputs)
