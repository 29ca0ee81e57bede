#!/usr/bin/env bash
# What a new Python user does: a fresh virtual environment on Debian's python3, the newest numpy
# 2.x from PyPI, `pip install .` from this checkout, then the Python test suite (which runs the
# README's Python program) against the installed package. `make test-venv` runs it; .ci/run runs it
# after `make test`. The build goes to build-pip/ (a second run recompiles only what changed, and
# ccache shares objects with build/ when installed).
#   VENV=path (default build-venv/), NUMPY="numpy>=2" (the numpy to test with).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/build-venv}
numpy_req=${NUMPY:-numpy>=2}
start=$(date +%s)
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check "$numpy_req" pytest
echo "venv-check: $("$py" -c 'import numpy, sys; print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}")')"
"$py" -m pip install --quiet --disable-pip-version-check "$root"
echo "venv-check: pip install . done in $(( $(date +%s) - start )) s"
# From another folder, so that `import spore` is the installed package; the tests that drive the
# CLI find it in the build folder (SPORE_BUILD_DIR). The OpenMP settings are ctest's for
# python_tests (CMakeLists.txt), so the two numpy runs are alike: with OpenMP's default (spinning)
# wait policy on a loaded 2-core machine the suite took 179 s here instead of 17 s.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$venv"
SPORE_BUILD_DIR="${SPORE_BUILD_DIR:-$root/build}" "$py" -c "import spore, numpy; print('venv-check: spore from', spore.__file__)"
SPORE_BUILD_DIR="${SPORE_BUILD_DIR:-$root/build}" "$py" -m pytest -q -p no:cacheprovider "$root/tests/python"
echo "venv-check: passed in $(( $(date +%s) - start )) s"
