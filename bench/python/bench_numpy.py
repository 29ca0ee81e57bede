"""numpy 1.x vs numpy 2.x under Spore, side by side: MindSpore's quick-start loop
(examples/python/custom_training_loop.py: Fashion-MNIST, one epoch, value_and_grad) timed with
Debian's python3 + numpy 1.24 (the package built into build/python) and with the venv of
scripts/venv_check.sh (numpy 2, the package `pip install .` installed), interleaved, medians.
The numpy-2 run is repeated with numpy's BLAS left at its default thread count
(SPORE_NUMPY_BLAS_THREADS = the core count), to show what the thread policy saves.
On a shared machine (other builds running) wall times swing several-fold from run to run, so each
configuration also reports its fastest run and its CPU seconds (user + sys of the child, which
other processes' load barely moves), with the load average before and after. Under such load,
run it with OMP_WAIT_POLICY=passive (as ctest runs the Python tests): OpenMP's default spinning
pool then loses most of its time slices to the other processes (5-15x slower runs, either numpy).

    python3 bench/python/bench_numpy.py [--reps 3] [--venv build-venv] [--mode pynative|graph]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(python, env_extra, mode):
    env = dict(os.environ, **env_extra)
    env.pop("OPENBLAS_NUM_THREADS", None)
    cmd = [python, os.path.join(ROOT, "examples", "python", "custom_training_loop.py"), "--epochs", "1",
           "--mode", mode]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, cwd="/tmp")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall, usage.ru_utime + usage.ru_stime


def numpy_version(python, env_extra):
    env = dict(os.environ, **env_extra)
    return subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"], env=env, check=True,
                          capture_output=True, text=True, cwd="/tmp").stdout.strip()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--venv", default=os.path.join(ROOT, "build-venv"))
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--mode", default="pynative", choices=["pynative", "graph"])
    a = p.parse_args()
    venv_py = os.path.join(a.venv, "bin", "python")
    if not os.path.exists(venv_py):
        sys.exit(f"no venv at {a.venv}: run scripts/venv_check.sh first")
    configs = {
        "numpy1": ("/usr/bin/python3", {"PYTHONPATH": os.path.join(a.build, "python")}),
        "numpy2": (venv_py, {}),
        "numpy2_blas_default": (venv_py, {"SPORE_NUMPY_BLAS_THREADS": str(os.cpu_count())}),
    }
    times = {k: [] for k in configs}
    cpu = {k: [] for k in configs}
    load0 = os.getloadavg()[0]
    for _ in range(a.reps):  # interleaved: drift on a shared machine hits every configuration alike
        for k, (py, env) in configs.items():
            wall, cpu_s = run(py, env, a.mode)
            times[k].append(wall)
            cpu[k].append(cpu_s)
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"MindSpore quick-start (custom_training_loop.py, 1 epoch, {a.mode}), {a.reps} interleaved runs "
          f"each, {os.cpu_count()} cores, load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')} "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")
    print(f"  {'':22s} {'numpy':14s} {'median':>8s} {'fastest':>8s} {'CPU s':>8s}   wall of each run")
    for k, (py, env) in configs.items():
        print(f"  {k:22s} numpy {numpy_version(py, env):8s} {med[k]:7.2f}s {best[k]:7.2f}s {cpu_med[k]:7.2f}s"
              f"   {['%.2f' % t for t in times[k]]}")
    for what, v in (("median wall", med), ("fastest wall", best), ("median CPU", cpu_med)):
        print(f"  numpy2 / numpy1, {what:12s} = {v['numpy2'] / v['numpy1']:.3f} (goal <= 1.1);  "
              f"numpy's BLAS at its default threads / policy = {v['numpy2_blas_default'] / v['numpy2']:.2f}x")

if __name__ == "__main__":
    main()
