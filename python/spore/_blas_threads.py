"""Threads: Spore's own pool and numpy's BLAS (OpenBLAS) in one process must not oversubscribe the
cores. Spore's pool is OpenMP's (all cores, or OMP_NUM_THREADS / spore._C.set_num_threads); numpy's
OpenBLAS would start as many threads again, and the two pools spin against each other: MindSpore's
quick-start loop ran 10x slower with numpy 2's bundled OpenBLAS until this was set.

The policy, applied once at `import spore`: numpy's BLAS runs on SPORE_NUMPY_BLAS_THREADS threads
(default 1: numpy's work beside a training step is small: data preparation, metrics), unless the
user chose already, through OPENBLAS_NUM_THREADS.
The OpenBLAS libraries loaded in the process are found in /proc/self/maps (numpy 1.x links the
system's libopenblas; numpy 2's wheels bundle scipy-openblas, whose symbols carry a prefix and a
suffix) and told through their own set_num_threads entry point.
"""
import ctypes
import os

# The entry points, by the builds that name them so.
_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "scipy_openblas_set_num_threads64_")
_GETTERS = ("openblas_get_num_threads", "openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "scipy_openblas_get_num_threads64_")


def _loaded_openblas():
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if ".so" in os.path.basename(p))


def _entry(lib, names):
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            return fn
    return None


def blas_threads():
    """{library path: its thread count} for every OpenBLAS loaded in this process."""
    out = {}
    for path in _loaded_openblas():
        try:
            get = _entry(ctypes.CDLL(path), _GETTERS)
        except OSError:
            continue
        if get is not None:
            get.restype = ctypes.c_int
            out[path] = get()
    return out


def limit_blas_threads(n=None):
    """Sets every loaded OpenBLAS to n threads (default: the policy above). Returns the libraries set."""
    if n is None:
        if "OPENBLAS_NUM_THREADS" in os.environ:  # the user's choice stands
            return []
        n = int(os.environ.get("SPORE_NUMPY_BLAS_THREADS", "1"))
    done = []
    for path in _loaded_openblas():
        try:
            set_ = _entry(ctypes.CDLL(path), _SETTERS)
        except OSError:
            continue
        if set_ is not None:
            set_.argtypes = [ctypes.c_int]
            set_(int(n))
            done.append(path)
    return done
