"""pytest set-up for the Python package: ctest runs these tests with PYTHONPATH=<build>/python
(the built package); run by hand, the build folder is found from SPORE_BUILD_DIR or ./build."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SPORE_BUILD_DIR", os.path.join(ROOT, "build"))
if not any(os.path.isdir(os.path.join(p, "spore")) and os.path.exists(os.path.join(p, "spore", "__init__.py"))
           for p in sys.path if p):
    sys.path.insert(0, os.path.join(BUILD, "python"))

FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.fixture(autouse=True)
def _pynative_and_seed():
    import spore as ms
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(1)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.fixture
def build_dir():
    return BUILD


@pytest.fixture
def root_dir():
    return ROOT
