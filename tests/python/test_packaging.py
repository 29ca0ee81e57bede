"""The packaging a new user relies on: `pip install .` gets a pybind11 that reads numpy 2 (declared
in [build-system]) and installs only the Python component; the compiled module was built with it."""
import os
import tomllib

import pytest

import spore as ms
from spore import _C


def test_pyproject_declares_what_pip_install_needs(root_dir):
    with open(os.path.join(root_dir, "pyproject.toml"), "rb") as f:
        pp = tomllib.load(f)
    requires = pp["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("pybind11>=2.1") for r in requires), requires
    assert any(r.startswith("scikit-build-core") for r in requires), requires
    sk = pp["tool"]["scikit-build"]
    assert sk["install"]["components"] == ["python"]  # not the CLI / headers (make install's)
    assert sk["build"]["targets"] == ["spore_python"]


def test_setup_pins_the_same_pybind11(root_dir):
    setup = open(os.path.join(root_dir, "scripts", "setup.sh")).read()
    assert "pybind11==2.13.6" in setup


def test_the_module_was_built_with_a_pybind11_that_reads_numpy_2():
    major, minor, _ = (int(x) for x in _C._pybind11_version.split("."))
    assert (major, minor) >= (2, 12), _C._pybind11_version


def test_a_build_with_the_cuda_backend_finds_it():
    # pip builds only spore._C; when the CUDA toolkit is there, libspore_cuda.so is built with it and
    # must sit next to libspore (installed package or build tree), or 'GPU' is silently missing.
    if not _C._cuda_backend_built:
        pytest.skip("built without the CUDA toolkit (no libspore_cuda.so)")
    try:
        ms.set_device("GPU")  # succeeds where a GPU is visible
    except RuntimeError as e:
        assert "no GPU is visible" in str(e), str(e)  # not "no CUDA backend" / "did not load"
    finally:
        ms.set_device("CPU")
