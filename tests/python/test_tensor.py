"""ms.Tensor: construction (numpy without a copy), dtypes, numpy and DLPack interop, operators,
indexing, printing, and errors mapped to Python exceptions."""
import numpy as np
import pytest

import spore as ms
from spore import ops


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ms.Tensor(a)
    assert t.shape == (2, 3) and t.dtype == ms.float32
    a[0, 0] = 42.0  # no copy: the tensor sees the change
    assert t.asnumpy()[0, 0] == 42.0
    back = t.asnumpy()
    assert np.shares_memory(back, a)


def test_non_contiguous_and_readonly_arrays():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = ms.Tensor(a[:, ::2])  # strided view: shared, strides kept
    np.testing.assert_array_equal(t.asnumpy(), a[:, ::2])
    r = np.arange(4, dtype=np.int32)
    r.flags.writeable = False
    t2 = ms.Tensor(r)  # read-only: copied
    assert not np.shares_memory(t2.asnumpy(), r)
    assert t2.dtype == ms.int32


def test_python_values_and_dtypes():
    assert ms.Tensor(1.5).dtype == ms.float32
    assert ms.Tensor(3).dtype == ms.int64
    assert ms.Tensor([1.0, 2.0]).dtype == ms.float32
    assert ms.Tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert ms.Tensor(True).dtype == ms.bool_
    assert ms.Tensor(np.ones(3), ms.float16).dtype == ms.float16
    assert repr(ms.float32) == "Float32" and str(ms.int32) == "Int32"
    assert ms.Tensor(np.zeros(2), dtype="bfloat16").dtype == ms.bfloat16
    assert ms.Tensor(np.zeros(2), dtype=np.int64).dtype == ms.int64
    assert ms.dtype_to_nptype(ms.float16) is np.float16


def test_bfloat16_to_numpy_is_float32():
    t = ms.Tensor(np.array([1.5, -2.25], np.float32)).astype(ms.bfloat16)
    a = t.asnumpy()
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, [1.5, -2.25])


def test_operators_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32) + 3
    x, y = ms.Tensor(a), ms.Tensor(b)
    np.testing.assert_allclose((x + y).asnumpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose((x - 2).asnumpy(), a - 2, rtol=1e-6)
    np.testing.assert_allclose((2 - x).asnumpy(), 2 - a, rtol=1e-6)
    np.testing.assert_allclose((x * y).asnumpy(), a * b, rtol=1e-6)
    np.testing.assert_allclose((x / y).asnumpy(), a / b, rtol=1e-6)
    np.testing.assert_allclose((x ** 2).asnumpy(), a ** 2, rtol=1e-6)
    np.testing.assert_allclose((-x).asnumpy(), -a)
    np.testing.assert_allclose(abs(x).asnumpy(), np.abs(a))
    np.testing.assert_allclose((x @ x.T).asnumpy(), a @ a.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal((x > 0).asnumpy(), a > 0)
    np.testing.assert_array_equal((x == x).asnumpy(), np.ones_like(a, bool))
    np.testing.assert_allclose((a + x).asnumpy(), a + a, rtol=1e-6)  # numpy on the left
    i = ms.Tensor(np.array([7, -7], np.int32))
    assert (i + 1).dtype == ms.int32  # a Python int keeps the tensor's dtype
    np.testing.assert_array_equal((i // 2).asnumpy(), np.array([7, -7]) // 2)
    np.testing.assert_array_equal((i % 3).asnumpy(), np.array([7, -7]) % 3)
    assert (i * 0.5).dtype == ms.float32


def test_methods_match_numpy():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = ms.Tensor(a)
    np.testing.assert_allclose(x.sum().asnumpy(), a.sum())
    np.testing.assert_allclose(x.sum(axis=1).asnumpy(), a.sum(1))
    np.testing.assert_allclose(x.mean(axis=(0, 2), keep_dims=True).asnumpy(), a.mean((0, 2), keepdims=True))
    np.testing.assert_allclose(x.max(axis=2).asnumpy(), a.max(2))
    np.testing.assert_array_equal(x.argmax(axis=1).asnumpy(), a.argmax(1))
    assert x.reshape(4, 6).shape == (4, 6) and x.reshape((6, -1)).shape == (6, 4)
    np.testing.assert_array_equal(x.transpose().asnumpy(), a.transpose())
    np.testing.assert_array_equal(x.transpose(1, 0, 2).asnumpy(), a.transpose(1, 0, 2))
    assert x.flatten().shape == (24,)
    assert x.expand_dims(0).shape == (1, 2, 3, 4) and x.expand_dims(0).squeeze().shape == (2, 3, 4)
    np.testing.assert_allclose(x.std().asnumpy(), a.std(), rtol=1e-5)
    assert x.astype(ms.int32).dtype == ms.int32
    assert x.size == 24 and x.ndim == 3 and len(x) == 2 and x.itemsize == 4
    assert x.sum().item() == float(a.sum())
    assert x.tolist() == a.tolist()


def test_indexing():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = ms.Tensor(a)
    for key in [1, -1, (1, 2), (slice(None), 1), (slice(1, 3), slice(None, None, 2)), (Ellipsis, 0),
                (None, 1), (0, Ellipsis, None), (slice(-2, None),)]:
        np.testing.assert_array_equal(x[key].asnumpy(), a[key], err_msg=str(key))
    idx = np.array([2, 0, 2])
    np.testing.assert_array_equal(x[ms.Tensor(idx)].asnumpy(), a[idx])
    np.testing.assert_array_equal(x[:, [1, 3]].asnumpy(), a[:, [1, 3]])
    mask = a > 30
    np.testing.assert_array_equal(x[ms.Tensor(mask)].asnumpy(), a[mask])
    with pytest.raises(IndexError, match="out of bounds"):
        x[3]
    y = ms.Tensor(np.zeros((3, 4), np.float32))
    y[1] = 5.0
    y[:, 0] = ms.Tensor(np.array([1, 2, 3], np.float32))
    expect = np.zeros((3, 4), np.float32)
    expect[1] = 5
    expect[:, 0] = [1, 2, 3]
    np.testing.assert_array_equal(y.asnumpy(), expect)
    rows = [r.asnumpy() for r in ms.Tensor(a[0])]
    assert len(rows) == 4 and (rows[2] == a[0, 2]).all()


def test_printing():
    t = ms.Tensor(np.array([[1.0, 2.5], [3.0, 4.0]], np.float32))
    assert str(t) == str(np.array([[1.0, 2.5], [3.0, 4.0]], np.float32))
    assert repr(t).startswith("Tensor(shape=[2, 2], dtype=Float32, value=")
    p = ms.Parameter(t, name="w")
    assert "name=w" in repr(p)


def test_dlpack_roundtrip():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ms.from_dlpack(a)  # numpy exports DLPack
    a[1, 1] = -1.0
    assert t.asnumpy()[1, 1] == -1.0  # shared
    b = np.from_dlpack(t)  # Spore exports DLPack
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(b, a)
    c = ms.Tensor(np.array([1, 2, 3], np.int64))
    np.testing.assert_array_equal(np.from_dlpack(c[1:]), [2, 3])


def test_errors_become_python_exceptions():
    x = ms.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"matmul"):
        ops.matmul(x, x)
    with pytest.raises(TypeError, match="unknown dtype 'float99'"):
        x.astype("float99")
    with pytest.raises(ValueError, match="The truth value of a Tensor with more than one element is ambiguous"):
        bool(x)


def test_device_errors_match_the_cpp_api():
    # ['CPU'], or ['CPU', 'GPU'] where the CUDA backend (libspore_cuda.so) is built next to libspore.
    with pytest.raises(RuntimeError,
    match=r"Unsupported device target Ascend\. This build supports \['CPU'(, 'GPU')?\]") as e:
        ms.set_device("Ascend")
    with pytest.raises(RuntimeError, match=r"GPU") as g:
        ms.set_device("GPU")
    assert "no GPU is visible" in str(g.value) or "no CUDA backend" in str(g.value), str(g.value)
    assert "Traceback" not in str(e.value) and ".cpp" not in str(e.value)
    with pytest.raises(RuntimeError, match="Unsupported device target Ascend"):
        with pytest.warns(DeprecationWarning):
            ms.set_context(device_target="Ascend")
    ms.set_device("CPU")
    assert ms.get_context("device_target") == "CPU"
    assert ms.context.get_context("device_num") == 1


def test_context_and_version(capsys):
    ms.set_context(mode=ms.GRAPH_MODE)
    assert ms.get_context("mode") == ms.GRAPH_MODE == 0
    ms.context.set_context(mode=ms.PYNATIVE_MODE)
    assert ms.get_context("mode") == 1
    with pytest.raises(ValueError, match="mode"):
        ms.set_context(mode=5)
    # An unknown key is an error naming it (MindSpore's rule), with the nearest known key.
    with pytest.raises(ValueError, match=r"'save_graph' \(did you mean 'save_graphs'\?\) is not recognized"):
        ms.set_context(save_graph=True, mode=ms.GRAPH_MODE)
    assert ms.get_context("mode") == ms.PYNATIVE_MODE  # nothing was changed
    with pytest.raises(ValueError, match="'foo_bar' is not recognized"):
        ms.set_context(foo_bar=1)
    with pytest.warns(UserWarning, match="max_call_depth=2000 changes nothing"):  # a MindSpore key: stored
        ms.set_context(max_call_depth=2000, save_graphs=False)
    assert ms.get_context("max_call_depth") == 2000
    assert ms.__version__ == "0.1.0"
    ms.run_check()
    out = capsys.readouterr().out
    assert "successfully" in out and "[CPU]" in out


def test_seed_reproduces_random_ops():
    ms.set_seed(7)
    a = ops.randn(4, 4).asnumpy()
    ms.set_seed(7)
    b = ops.randn(4, 4).asnumpy()
    np.testing.assert_array_equal(a, b)
    assert ms.get_seed() == 7


def test_initializers():
    from spore.common.initializer import Normal, One, initializer
    ms.set_seed(3)
    t = ms.Tensor(shape=(200, 50), dtype=ms.float32, init=Normal(0.5))
    a = t.asnumpy()
    assert a.shape == (200, 50) and abs(a.std() - 0.5) < 0.02 and abs(a.mean()) < 0.02
    np.testing.assert_array_equal(initializer(One(), [2, 2]).asnumpy(), np.ones((2, 2)))
    np.testing.assert_array_equal(initializer("zeros", (3,), ms.int32).asnumpy(), [0, 0, 0])
    p = ms.Parameter(initializer("ones", (2,)), name="b")
    assert p.name == "b" and p.requires_grad


def test_grad_positions():
    x = ms.Tensor(np.array([1.0, 2.0], np.float32))
    y = ms.Tensor(np.array([3.0, -1.0], np.float32))
    gx, gy = ops.grad(lambda a, b: (a * a * b).sum(), grad_position=(0, 1))(x, y)
    np.testing.assert_allclose(gx.asnumpy(), 2 * x.asnumpy() * y.asnumpy())
    np.testing.assert_allclose(gy.asnumpy(), x.asnumpy() ** 2)
