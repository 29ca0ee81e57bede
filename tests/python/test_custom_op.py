"""ops.Custom (spore/ops/custom.py over spore/custom_op.h): a pyfunc kernel's forward and its bprop's
gradient against finite differences, in PYNATIVE_MODE and GRAPH_MODE; an AOT library compiled here
with the system compiler (tests/custom_op/aot/add_kernel.cpp, MindSpore's entry point) giving the
built-in add's results; reg_info's dtype rows; and the errors for bad definitions and calls."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import spore as ms
from spore import nn, ops
from spore.ops import Custom, CustomRegOp, DataType

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _cube():
    """x ** 3 on numpy, its gradient written with spore ops."""
    return Custom(lambda x: x ** 3, out_shape=lambda s: s, out_dtype=lambda t: t, func_type="pyfunc",
                  bprop=lambda x, out, dout: (3 * x * x * dout,))


def test_pyfunc_forward_in_both_modes():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    cube = _cube()
    np.testing.assert_allclose(cube(ms.Tensor(x)).asnumpy(), x ** 3, rtol=1e-6)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cube = cube
            self.dense = nn.Dense(4, 2)

        def construct(self, a):
            return self.dense(self.cube(a) + 1.0)

    ms.set_seed(1)
    net = Net()
    eager = net(ms.Tensor(x)).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    graph = [net(ms.Tensor(x)).asnumpy() for _ in range(2)]  # traced once, then the compiled graph
    np.testing.assert_allclose(graph[0], eager, rtol=1e-6)
    np.testing.assert_allclose(graph[1], eager, rtol=1e-6)
    # A fixed out_shape / out_dtype (values, not functions) and an output unlike the input.
    rowsum = Custom(lambda a: a.sum(axis=1, dtype=np.float64), out_shape=(3,), out_dtype=ms.float64,
                    func_type="pyfunc")
    np.testing.assert_allclose(rowsum(ms.Tensor(x)).asnumpy(), x.sum(1, dtype=np.float64), rtol=1e-12)
    assert rowsum(ms.Tensor(x)).dtype == ms.float64
    # Graph mode runs a pyfunc once per call, as PyNative (no merging of equal calls, no folding).
    calls = []
    counted = Custom(lambda a: calls.append(1) or a + 1, func_type="pyfunc")
    twice = ms.jit(lambda a: counted(a) + counted(a) + counted(ms.Tensor(np.ones(2, np.float32))).sum())
    np.testing.assert_allclose(twice(ms.Tensor(x)).asnumpy(), 2 * (x + 1) + 4, rtol=1e-6)
    assert len(calls) == 3
    # Default infer (None): the inputs broadcast, input 0's dtype.
    mul = Custom(lambda a, b: a * b, func_type="pyfunc")
    assert mul(ms.Tensor(x), ms.Tensor(x[:1])).shape == (3, 4)


def _finite_difference(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE], ids=["pynative", "graph"])
def test_pyfunc_bprop_gradient_matches_finite_differences(mode):
    ms.set_context(mode=mode)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3))
    w = rng.standard_normal((2, 3))
    # sin on numpy; bprop cos(x) * dout; and a second input with no gradient (None)
    sin_scaled = Custom(lambda a, s: np.sin(a) * s, out_shape=lambda a, s: a, out_dtype=lambda a, s: a,
                        func_type="pyfunc", bprop=lambda a, s, out, dout: (ops.cos(a) * s * dout, None))
    s = ms.Tensor(np.full((2, 3), 1.5))
    wt = ms.Tensor(w)

    def loss(a):
        return (sin_scaled(a, s) * wt).sum()

    got = ms.grad(ms.jit(loss) if mode == ms.GRAPH_MODE else loss)(ms.Tensor(x)).asnumpy()
    want = _finite_difference(lambda v: float((np.sin(v) * 1.5 * w).sum()), x)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got, np.cos(x) * 1.5 * w, rtol=1e-12)
    # MindSpore's usual form: the bprop is another Custom op.
    dsquare = Custom(lambda a, d: 2 * a * d, func_type="pyfunc")
    square = Custom(lambda a: a * a, func_type="pyfunc", bprop=lambda a, out, dout: (dsquare(a, dout),))
    got = ms.grad(lambda a: (square(a) * wt).sum())(ms.Tensor(x)).asnumpy()
    np.testing.assert_allclose(got, _finite_difference(lambda v: float((v * v * w).sum()), x), rtol=1e-7,
                               atol=1e-9)


def test_pyfunc_trains_the_same_in_both_modes():
    x = ms.Tensor(np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32))
    y = ms.Tensor(np.random.default_rng(4).standard_normal((8, 1)).astype(np.float32))
    cube = _cube()

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Dense(4, 6), nn.Dense(6, 1)

        def construct(self, a):
            return self.fc2(cube(self.fc1(a)))

    losses = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(5)
        net = Net()
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.01))
        losses[mode] = [float(step(x, y).asnumpy()) for _ in range(5)]
    np.testing.assert_allclose(losses[ms.GRAPH_MODE], losses[ms.PYNATIVE_MODE], rtol=1e-5)
    assert losses[ms.PYNATIVE_MODE][-1] < losses[ms.PYNATIVE_MODE][0]


def _compiler():
    for cc in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if cc and shutil.which(cc):
            return cc
    pytest.skip("no C++ compiler on PATH to build the AOT kernel")


@pytest.fixture(scope="module")
def aot_library(tmp_path_factory):
    out = tmp_path_factory.mktemp("aot") / "libcustom_add.so"
    src = os.path.join(ROOT, "tests", "custom_op", "aot", "add_kernel.cpp")
    subprocess.run([_compiler(), "-shared", "-fPIC", "-O2", "-o", str(out), src], check=True)
    return str(out)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE], ids=["pynative", "graph"])
def test_aot_library_equals_the_builtin_add(aot_library, mode):
    ms.set_context(mode=mode)
    add = Custom(aot_library + ":CustomAdd", out_shape=lambda a, b: a, out_dtype=lambda a, b: a, func_type="aot",
                 bprop=lambda a, b, out, dout: (dout, dout))
    rng = np.random.default_rng(6)
    for dt in (np.float32, np.float64, np.int32):
        a = ms.Tensor((rng.standard_normal((3, 5)) * 10).astype(dt))
        b = ms.Tensor((rng.standard_normal((3, 5)) * 10).astype(dt))
        f = ms.jit(lambda u, v: add(u, v)) if mode == ms.GRAPH_MODE else add
        got = f(a, b)
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got.asnumpy(), ops.add(a, b).asnumpy())
    a = ms.Tensor(rng.standard_normal((2, 3)))
    w = ms.Tensor(rng.standard_normal((2, 3)))
    g = ms.grad(lambda u: (add(u, u) * w).sum())(a)
    np.testing.assert_allclose(g.asnumpy(), 2 * w.asnumpy(), rtol=1e-15)


def test_reg_info_restricts_the_dtypes(aot_library):
    info = (CustomRegOp("CustomAdd").input(0, "a").input(1, "b").output(0, "y")
            .dtype_format(DataType.F32_Default, DataType.F32_Default, DataType.F32_Default)
            .target("CPU").get_op_info())
    add = Custom(aot_library + ":CustomAdd", out_shape=lambda a, b: a, out_dtype=lambda a, b: a, func_type="aot",
                 reg_info=info)
    one = ms.Tensor(np.ones(3, np.float32))
    np.testing.assert_array_equal(add(one, one).asnumpy(), [2, 2, 2])
    with pytest.raises(TypeError, match=r"dtypes \('float64', 'float64', 'float64'\) match no dtype_format row"):
        add(ms.Tensor(np.ones(3)), ms.Tensor(np.ones(3)))
    with pytest.raises(NotImplementedError, match="attribute 'alpha' cannot reach a Spore custom kernel"):
        CustomRegOp().attr("alpha", "required", "float")
    with pytest.raises(NotImplementedError, match="format 'NC1HWC0' is not supported"):
        Custom(lambda a: a, func_type="pyfunc", reg_info={"dtype_format": [[["float32", "NC1HWC0"]] * 2]})


def test_bad_definitions_and_calls_are_clear_errors(aot_library, tmp_path):
    x = ms.Tensor(np.ones((2, 3), np.float32))
    # out_shape that disagrees with what the function returns
    wrong = Custom(lambda a: a, out_shape=lambda s: [s[1], s[0]], out_dtype=lambda t: t, func_type="pyfunc")
    with pytest.raises(ValueError, match=r"returned \(2, 3\) float32 where its infer said \(3, 2\) float32"):
        wrong(x)
    wrong_dtype = Custom(lambda a: a.astype(np.float64), func_type="pyfunc")
    with pytest.raises(ValueError, match=r"returned \(2, 3\) float64 where its infer said \(2, 3\) float32"):
        wrong_dtype(x)
    with pytest.raises(ValueError, match="out_shape must be a shape"):
        Custom(lambda a: a, out_shape=lambda s: "big", func_type="pyfunc")(x)
    with pytest.raises(ValueError, match="out_shape must be a shape"):
        Custom(lambda a: a, out_shape=(2, -1), func_type="pyfunc")
    with pytest.raises(NotImplementedError, match="gives 2 output shapes: Spore's custom ops have one output"):
        Custom(lambda a: (a, a), out_shape=((2, 3), (2, 3)), func_type="pyfunc")
    with pytest.raises(NotImplementedError, match="returned 2 arrays"):
        Custom(lambda a: (a, a), func_type="pyfunc")(x)
    with pytest.raises(TypeError, match="out_dtype gave 'float33', not a dtype"):
        Custom(lambda a: a, out_dtype=lambda t: "float33", func_type="pyfunc")(x)
    with pytest.raises(TypeError, match="input 0 is bfloat16, which numpy .* has not; cast it to float32"):
        Custom(lambda a: a, func_type="pyfunc")(x.astype(ms.bfloat16))
    # func_type
    with pytest.raises(ValueError, match="func_type must be one of"):
        Custom(lambda a: a, func_type="cuda")
    with pytest.raises(NotImplementedError, match="func_type='hybrid' is not supported: .*AKG"):
        Custom(lambda a: a)  # MindSpore's default func_type
    with pytest.raises(NotImplementedError, match="func_type='tbe' is not supported: .*Ascend"):
        Custom(lambda a: a, func_type="tbe")
    with pytest.raises(TypeError, match="needs a Python function"):
        Custom("lib.so:f", func_type="pyfunc")
    # aot: the library, the symbol
    with pytest.raises(TypeError, match='needs func="path/to/lib.so:func_name"'):
        Custom(aot_library, func_type="aot")
    with pytest.raises(ValueError, match="has no function 'CustomMul'.*extern \"C\" int CustomMul"):
        Custom(aot_library + ":CustomMul", func_type="aot")
    missing = str(tmp_path / "libmissing.so")
    with pytest.raises(OSError, match="cannot load the AOT library '.*libmissing.so'"):
        Custom(missing + ":CustomAdd", func_type="aot")
    add = Custom(aot_library + ":CustomAdd", func_type="aot")
    ones64 = ms.Tensor(np.ones(2, np.int64))
    with pytest.raises(RuntimeError, match="the AOT kernel 'CustomAdd' returned 1"):
        add(ones64, ones64)
    # gradients: none defined, or the wrong number
    no_bprop = Custom(lambda a: a * 2, func_type="pyfunc")
    with pytest.raises(RuntimeError, match="has no bprop: pass bprop=fn"):
        ms.grad(lambda a: no_bprop(a).sum())(x)
    bad_bprop = Custom(lambda a: a * 2, func_type="pyfunc", bprop=lambda a, out, dout: (dout, dout))
    with pytest.raises(ValueError, match="bprop returned 2 gradients for 1 inputs"):
        ms.grad(lambda a: bad_bprop(a).sum())(x)
    # a function error comes through as itself
    def boom(a):
        raise KeyError("from the user's function")
    with pytest.raises(KeyError, match="from the user's function"):
        Custom(boom, func_type="pyfunc")(x)


def test_definitions_are_registered_once():
    fn = lambda a: a + 1  # noqa: E731
    a, b = Custom(fn, func_type="pyfunc"), Custom(fn, func_type="pyfunc")
    x = ms.Tensor(np.zeros(2, np.float32))
    a(x)
    b(x)
    assert a._handle(1).name == b._handle(1).name
    assert a._handle(2).name != a._handle(1).name  # another number of inputs: another op
