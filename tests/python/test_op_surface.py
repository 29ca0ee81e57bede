"""The op surface (spore/ops/surface.py) against src/ops/ops.def, spore.ops and spore._C: every
primitive reachable or named internal, every public default equal to the table, no default kept in
the bindings, and every intended C++/Python difference in docs/python.md. The checker is also run on
deliberately wrong tables, so a broken check cannot pass silently."""
import inspect
import re
from pathlib import Path

import spore
import spore.ops as ops
from spore import _C
from spore.ops import functional, surface

ROOT = Path(__file__).resolve().parents[2]


def ops_def_names():
    text = (ROOT / "src" / "ops" / "ops.def").read_text()
    return re.findall(r'^SPORE_OP\(\w+, "(\w+)"', text, re.M)


def public_functions():
    """spore.ops functions written in functional.py (the _C ones bound as they are take no defaults)."""
    out = {}
    for name, fn in vars(functional).items():
        if not name.startswith("_") and inspect.isfunction(fn) and fn.__module__ == functional.__name__:
            out[name] = fn
    return out


def defaults_of(fn):
    return {p.name: p.default for p in inspect.signature(fn).parameters.values()
            if p.default is not inspect.Parameter.empty}


def surface_problems(primitives, defaults, names=None, functions=None):
    """Every disagreement between the tables and the code, as sentences."""
    names = ops_def_names() if names is None else names
    functions = public_functions() if functions is None else functions
    problems = []
    for n in names:
        if n not in primitives:
            problems.append(f"ops.def row '{n}' is not in spore/ops/surface.py PRIMITIVES: name its Python "
                            "face (ops.x / Tensor.x) or say why it is internal")
    for n, face in primitives.items():
        if n not in names:
            problems.append(f"PRIMITIVES names '{n}', which is not an ops.def row any more")
        elif face.startswith("ops."):
            if not callable(getattr(ops, face[4:], None)):
                problems.append(f"'{n}' is said to be reached by spore.{face}, which does not exist")
        elif face.startswith("Tensor."):
            if not hasattr(spore.Tensor, face[7:]):
                problems.append(f"'{n}' is said to be reached by {face}, which does not exist")
        elif not face.startswith("internal: "):
            problems.append(f"'{n}': '{face}' is neither ops.x, Tensor.x nor 'internal: why'")
    for name, fn in sorted(functions.items()):
        have, want = defaults_of(fn), defaults.get(name)
        if want is None:
            if have:
                problems.append(f"spore.ops.{name} has defaults {have} that DEFAULTS does not list")
        elif have != want:
            problems.append(f"spore.ops.{name} defaults {have} differ from DEFAULTS {want}")
    for name in defaults:
        if name not in functions:
            problems.append(f"DEFAULTS lists spore.ops.{name}, which is not a function of functional.py")
    return problems


def test_the_tables_agree_with_ops_def_and_the_code():
    assert surface_problems(surface.PRIMITIVES, surface.DEFAULTS) == []


def test_every_ops_def_row_is_counted():
    names = ops_def_names()
    assert len(names) > 90 and len(set(names)) == len(names)


def test_a_differing_default_fails():
    bad = {k: dict(v) for k, v in surface.DEFAULTS.items()}
    bad["leaky_relu"]["alpha"] = 0.01
    problems = surface_problems(surface.PRIMITIVES, bad)
    assert len(problems) == 1 and "leaky_relu" in problems[0] and "0.01" in problems[0]


def test_a_missing_op_fails():
    prims = dict(surface.PRIMITIVES)
    del prims["gelu"]
    problems = surface_problems(prims, surface.DEFAULTS)
    assert any("'gelu' is not in" in p for p in problems)
    prims = dict(surface.PRIMITIVES, gelu="ops.no_such_gelu")
    assert any("spore.ops.no_such_gelu, which does not exist" in p
               for p in surface_problems(prims, surface.DEFAULTS))
    # A new ops.def row without a Python face.
    assert any("'new_op'" in p for p in surface_problems(surface.PRIMITIVES, surface.DEFAULTS,
                                                         names=ops_def_names() + ["new_op"]))


def test_a_new_default_not_in_the_table_fails():
    def leaky_relu(input, alpha=0.3):
        return input
    problems = surface_problems(surface.PRIMITIVES, surface.DEFAULTS,
                                functions=dict(public_functions(), leaky_relu=leaky_relu))
    assert len(problems) == 1 and "0.3" in problems[0]


def test_bindings_keep_no_defaults():
    # pybind11 writes a default into the signature line of the docstring ("alpha: float = 0.2").
    for name in ops_def_names():
        fn = getattr(_C, name, None)
        if fn is None or not callable(fn) or not getattr(fn, "__doc__", None):
            continue
        for line in fn.__doc__.splitlines():
            if line.startswith(f"{name}(") or re.match(r"^\d+\. " + name + r"\(", line):
                assert " = " not in line, f"spore._C.{name} keeps a default: {line}"


def test_defaults_behave_as_the_table_says():
    x = spore.Tensor([[-1.0, 2.0]])
    assert ops.leaky_relu(x).asnumpy()[0, 0] == spore.Tensor(-0.2).asnumpy()
    exact = ops.gelu(spore.Tensor([1.0])).asnumpy()[0]
    tanh = ops.gelu(spore.Tensor([1.0]), approximate="tanh").asnumpy()[0]
    assert abs(exact - 0.8413447) < 1e-6 and abs(tanh - 0.8411920) < 1e-6


def test_intended_differences_are_documented():
    doc = (ROOT / "docs" / "python.md").read_text()
    for name in surface.CPP_DIFFERENCES:
        assert f"`{name}`" in doc, f"docs/python.md does not list the C++/Python difference of {name}"
