"""Tensors from numpy arrays of every dtype, byte order, stride sign and contiguity numpy can make
(zero-size and zero-stride included): each is converted with its values or refused with a
TypeError / ValueError, never a signal. Runs under numpy 1.x (Debian's) and 2.x (the venv check,
scripts/venv_check.sh)."""
import numpy as np
import pytest

import spore as ms

NP2 = int(np.__version__.split(".")[0]) >= 2

# dtype -> the Spore dtype it becomes (values kept), or the error it raises.
CONVERTED = {
    "bool": ms.bool_, "int8": ms.int8, "uint8": ms.uint8, "int16": ms.int32, "uint16": ms.int32,
    "int32": ms.int32, "uint32": ms.int64, "int64": ms.int64, "uint64": ms.int64, "float16": ms.float16,
    "float32": ms.float32, "float64": ms.float64,
}
REFUSED = {"complex64": TypeError, "complex128": TypeError, "longdouble": TypeError, "U3": TypeError,
           "S3": TypeError, "object": TypeError, "datetime64[D]": TypeError, "timedelta64[s]": TypeError,
           "V4": TypeError}


def values(dtype, shape=(2, 3)):
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "b":
        return (np.arange(n) % 2 == 0).reshape(shape)
    return (np.arange(n) % 7 + 1).astype(dtype).reshape(shape)


def layouts(a):
    """The same values in every layout numpy makes: (name, array)."""
    yield "c", a
    yield "fortran", np.asfortranarray(a)
    yield "negative stride", a[::-1, ::-1]
    yield "strided slice", np.ascontiguousarray(np.repeat(a, 2, axis=1))[:, ::2]
    yield "transposed", a.T
    swapped = a.astype(a.dtype.newbyteorder("S"))
    yield "other byte order", swapped
    ro = a.copy()
    ro.setflags(write=False)
    yield "read-only", ro
    raw = np.zeros(a.nbytes + 1, np.uint8)
    mis = raw[1:].view(a.dtype).reshape(a.shape)
    mis[...] = a
    if a.dtype.itemsize > 1:
        assert mis.ctypes.data % a.dtype.itemsize != 0
    yield "misaligned", mis
    yield "zero stride", np.broadcast_to(a[:1], a.shape)
    yield "zero-size", a[:0]
    yield "0-d", a[0, 0].reshape(())


@pytest.mark.parametrize("dtype", sorted(CONVERTED))
def test_every_supported_dtype_and_layout_keeps_its_values(dtype):
    for name, a in layouts(values(dtype)):
        t = ms.Tensor(a)
        assert t.dtype == CONVERTED[dtype], (dtype, name)
        assert t.shape == a.shape, (dtype, name)
        got = t.asnumpy()
        assert np.array_equal(got, a.astype(got.dtype)), (dtype, name, got, a)


@pytest.mark.parametrize("dtype", sorted(REFUSED))
def test_unsupported_dtypes_are_refused_with_a_clear_error(dtype):
    a = np.zeros(3, dtype=dtype)
    with pytest.raises(REFUSED[dtype]) as e:
        ms.Tensor(a)
    assert "dtype" in str(e.value)


def test_uint64_beyond_int64_is_refused_not_wrapped():
    with pytest.raises(ValueError, match="above 2\\*\\*63 - 1"):
        ms.Tensor(np.array([1, 2**63], dtype=np.uint64))
    assert ms.Tensor(np.array([2**63 - 1], dtype=np.uint64)).asnumpy()[0] == 2**63 - 1


def test_shared_memory_when_the_layout_allows_it():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ms.from_numpy(a)
    a[0, 0] = 42.0  # MindSpore's from_numpy shares the buffer
    assert t.asnumpy()[0, 0] == 42.0
    b = a[::-1]  # negative strides: a copy, never a wrong view
    tb = ms.Tensor(b)
    assert np.array_equal(tb.asnumpy(), b)


def test_tensor_to_numpy_protocols():
    t = ms.Tensor(np.arange(4, dtype=np.float32))
    assert np.array_equal(np.asarray(t), np.arange(4, dtype=np.float32))
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert t.__array__(copy=True) is not t.__array__(copy=True)
    with pytest.raises(ValueError, match="copy=False"):
        t.__array__(dtype=np.float64, copy=False)
    if NP2:
        assert np.asarray(t, copy=False).dtype == np.float32
        with pytest.raises(ValueError):
            np.asarray(t, dtype=np.float64, copy=False)
        assert np.array_equal(np.from_dlpack(t), np.arange(4, dtype=np.float32))
    back = ms.from_dlpack(np.arange(3, dtype=np.int32))
    assert back.dtype == ms.int32 and back.asnumpy().tolist() == [0, 1, 2]
    cap = t.__dlpack__(max_version=(1, 0), copy=None)
    assert cap is not None


def test_numpy_blas_shares_the_cores():
    from spore._blas_threads import blas_threads
    import os
    if "OPENBLAS_NUM_THREADS" in os.environ:
        pytest.skip("OPENBLAS_NUM_THREADS is set: the user's choice stands")
    want = int(os.environ.get("SPORE_NUMPY_BLAS_THREADS", "1"))
    counts = blas_threads()
    assert counts, "numpy's OpenBLAS was not found among the loaded libraries"
    assert set(counts.values()) == {want}, counts
