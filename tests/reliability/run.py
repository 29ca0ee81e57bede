#!/usr/bin/env python3
"""Spore's reliability harness: runs every bad input and fault of cases.py against the CLI
(`spore`), the loaders and the Python front end, as a new user would, and classifies each outcome.

  python3 tests/reliability/run.py --spore build/spore --pythonpath build/python [--full]
      [--only REGEX] [--json report.json] [--work DIR] [--jobs N]

Without --full (or SPORE_RELIABILITY_FULL=1) only the fast subset runs (ctest `reliability_fast`).
Exit status 1 when any case is a crash, internal, wrong, data_lost or hang. See docs/hardening.md
("The reliability list") for the classes and the heuristic for "clear"."""
import argparse
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases as case_list  # noqa: E402

FAILING = ("crash", "internal", "wrong", "data_lost", "hang")
CLASSES = ("ok", "clear", "unclear") + FAILING + ("skipped",)

# -- the heuristic for "clear" (docs/hardening.md). A failure is clear when its message
#    (1) names the thing: contains one of the case's names (the bad file's base name, the flag, the
#        key, the tensor), case-insensitively;
#    (2) says what was expected or what was found: contains one of the phrases of EXPECT_WORDS
#        (an expectation, a comparison, a finding such as "is missing", "past the end", or the
#        fix after a semicolon: "; save the array as little-endian");
#    (3) has substance: at least 30 characters remain once the names, the paths and the
#        "spore: <kind>:" prefix are removed (so "spore: IOError: cannot open x.npy" is not clear:
#        it says neither why nor what to do).
EXPECT_WORDS = re.compile(
    r"expect|must |needs? |should|required|got |found|has no|have no|\bis not\b|\bare not\b|isn't|not an? |"
    r"no such|does not|do not|doesn't|cannot|can't|unknown|unsupported|not supported|invalid|missing|\bonly\b|"
    r"too (large|small|big|many|few|short|long)|exceeds?|beyond|(larger|smaller|shorter|longer|more|fewer)( \w+)? than|"
    r"at least|at most|out of range|not in range|past the end|truncated|ends? (at|before|after|in)|is empty|"
    r"refus|mismatch|differ|duplicate|in use|not recognized|is lost|instead|permission|read-only|denied|"
    r"no space|limit|fail|<=|>=|newest|\bnot in\b|\btakes?\b|declares|\bno (input|output|node|array|file)|"
    r"\bno \"|"
    # ... or it states the fix: "; save ...", "; pass ...", "; use ..."
    r";\s*(save|pass|use|set|point|export|convert|remove|rename|map|add|write|run|rerun|give|name)\b", re.I)
# (4) no C++ or library internals: such text is "internal" whatever else the message says.
INTERNAL = re.compile(r"internal error|json\.exception|std::|basic_string|vector::_M|bad_alloc|"
                      r"what\(\):|terminate called|Unable to cast|pybind11|Assertion failed|OpenCV\(", re.I)
PY_INTERNAL_TYPES = {"AttributeError", "NameError", "UnboundLocalError", "IndexError", "KeyError",
                     "ZeroDivisionError", "AssertionError", "SystemError", "RecursionError"}
CRASH_TEXT = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|LeakSanitizer|"
                        r"Segmentation fault|Aborted \(core|Fatal Python error|core dumped", re.I)
PREFIX = re.compile(r"^spore(\s*\(rank \d+\))?:\s*([A-Za-z]+Error:\s*)?")


def error_message(stderr):
    """The CLI's error: its `spore: ...` lines (one per error), else the last non-empty line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    mine = [ln for ln in lines if ln.startswith("spore:") or ln.startswith("spore (rank")]
    return "\n".join(mine) if mine else (lines[-1] if lines else "")


def is_clear(msg, names):
    low = msg.lower()
    named = [n for n in names if n and n.lower() in low]
    if not named or not EXPECT_WORDS.search(msg):
        return False
    rest = PREFIX.sub("", msg)
    for n in named:
        rest = re.sub(re.escape(n), "", rest, flags=re.I)
    rest = re.sub(r"\S*/\S*", "", rest)  # paths: a long path is no substance
    return len(rest.strip()) >= 30


def classify_failure(names, msg):
    """A failure the case expected (or allowed): clear or unclear."""
    if INTERNAL.search(msg):
        return "internal"
    return "clear" if is_clear(msg, names) else "unclear"


class Ctx:
    """What the cases see: the binaries, the work folder and the fixtures (built on first use)."""

    def __init__(self, spore, pythonpath, work, timeout):
        self.spore, self.pythonpath, self.work, self.timeout = spore, pythonpath, work, timeout
        self.fx_dir = os.path.join(work, "fx")
        os.makedirs(self.fx_dir, exist_ok=True)
        self._fx, self._worker = {}, None
        self.env = dict(os.environ, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="passive")
        if pythonpath:
            self.env["PYTHONPATH"] = pythonpath

    # -- running the CLI
    def cli(self, args, cwd=None, env=None, timeout=None, preexec=None):
        """Runs `spore args`: {rc, signal, timed_out, out, err, seconds}."""
        t0 = time.time()
        e = dict(self.env, **(env or {}))
        p = subprocess.Popen([self.spore] + list(args), cwd=cwd, env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=preexec, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout or self.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            timed_out = True
        rc = p.returncode
        return {"rc": rc, "signal": -rc if rc is not None and rc < 0 else 0, "timed_out": timed_out,
                "out": out.decode("utf-8", "replace"), "err": err.decode("utf-8", "replace"),
                "seconds": time.time() - t0}

    def fx(self, name):
        """A fixture (cases.FIXTURES[name](ctx) builds it once); None when it cannot be built here."""
        if name not in self._fx:
            try:
                self._fx[name] = case_list.FIXTURES[name](self)
            except case_list.Unavailable as e:
                print(f"  fixture {name}: unavailable ({e})", flush=True)
                self._fx[name] = None
        return self._fx[name]

    # -- the Python worker (one process for all Python cases; restarted after a crash or hang)
    def _start_worker(self):
        # stderr to a file, not a pipe: a case that prints much would otherwise block the worker
        self._worker_err = open(os.path.join(self.work, "pyworker.stderr"), "a+")
        self._worker_err_start = self._worker_err.seek(0, 2)
        self._worker = subprocess.Popen([sys.executable, os.path.join(HERE, "pyworker.py")], env=self.env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._worker_err,
                                        start_new_session=True)
        self._buf = b""

    def py(self, case_id, code, d, timeout=None):
        """Runs a Python snippet in the worker: {status: ok|exc|crash|hang, type, msg, result, signal}."""
        if self._worker is None or self._worker.poll() is not None:
            self._start_worker()
        w = self._worker
        w.stdin.write((json.dumps({"id": case_id, "code": code, "dir": d, "fx": self.fx_dir}) + "\n").encode())
        w.stdin.flush()
        deadline = time.time() + (timeout or self.timeout)
        fd = w.stdout.fileno()
        while True:
            # Lines are split here from raw reads: a buffered readline() could swallow the answer
            # into its buffer, and select() would then wait for data that already arrived.
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                if line.startswith(b"@result "):
                    return json.loads(line[len(b"@result "):].decode())
            left = deadline - time.time()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait()
                self._worker = None
                return {"status": "hang", "msg": f"no answer in {timeout or self.timeout:.0f} s"}
            chunk = os.read(fd, 65536)
            if not chunk:  # the worker died: a crash in this case
                w.wait()
                err = self._drain_stderr(w)
                self._worker = None
                return {"status": "crash", "signal": -w.returncode if w.returncode < 0 else 0,
                        "msg": err[-2000:], "rc": w.returncode}
            self._buf += chunk

    def _drain_stderr(self, w):
        """What the dead worker wrote on stderr (the tail is what its crash printed)."""
        self._worker_err.flush()
        self._worker_err.seek(self._worker_err_start)
        return self._worker_err.read()

    def close(self):
        if self._worker is not None and self._worker.poll() is None:
            self._worker.stdin.close()
            try:
                self._worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._worker.pid, signal.SIGKILL)


def run_case(ctx, case):
    """One case -> a result dict with its class."""
    d = os.path.join(ctx.work, "cases", case.id)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for need in case.needs:
        if ctx.fx(need) is None:
            return {"class": "skipped", "message": f"needs fixture {need}"}
    files = case.files(ctx, d) if callable(case.files) else (case.files or {})
    for rel, blob in files.items():
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(blob if isinstance(blob, bytes) else blob.encode())
    if case.kind == "fault":
        return case.fault(ctx, d)
    sub = {"d": d, "fx": ctx.fx_dir}
    if case.kind == "cli":
        args = [a.format(**sub) for a in (case.argv(ctx, d) if callable(case.argv) else case.argv)]
        r = ctx.cli(args, cwd=d, env=case.env, timeout=case.timeout)
        text = r["err"] + r["out"]
        res = {"rc": r["rc"], "seconds": round(r["seconds"], 3), "argv": args}
        if r["timed_out"]:
            return dict(res, **{"class": "hang", "message": f"still running after {case.timeout or ctx.timeout} s"})
        if r["signal"] or CRASH_TEXT.search(text):
            return dict(res, **{"class": "crash", "message": f"signal {r['signal']}: " + text[-1500:]})
        msg = error_message(r["err"]) if r["rc"] != 0 else ""
        succeeded = r["rc"] == 0
        full = r
    else:  # py
        r = ctx.py(case.id, case.code.replace("{d}", d).replace("{fx}", ctx.fx_dir), d, timeout=case.timeout)
        res = {"seconds": None}
        if r["status"] == "hang":
            return dict(res, **{"class": "hang", "message": r["msg"]})
        if r["status"] == "crash":
            return dict(res, **{"class": "crash", "message": f"worker died (rc {r.get('rc')}): {r['msg']}"})
        succeeded = r["status"] == "ok"
        msg = "" if succeeded else f"{r['type']}: {r['msg']}"
        if not succeeded and r["type"] in PY_INTERNAL_TYPES:
            return dict(res, **{"class": "internal", "message": msg + f" (raised at {r.get('where')})"})
        full = r
    if succeeded:
        if INTERNAL.search(full.get("err", "") if case.kind == "cli" else ""):
            return dict(res, **{"class": "internal", "message": error_message(full["err"])})
        verdict = case.check(ctx, d, full) if case.check else None
        if verdict:  # (class, note)
            return dict(res, **{"class": verdict[0], "message": verdict[1]})
        if case.expect == "error":
            out = (full.get("out", "") + full.get("err", "")) if case.kind == "cli" else full.get("result", "")
            return dict(res, **{"class": "wrong", "message": "accepted (exit 0) where it must fail: " +
                                out.strip()[-600:]})
        return dict(res, **{"class": "ok", "message": ""})
    if case.expect == "ok":
        return dict(res, **{"class": "wrong", "message": "refused a valid input: " + msg})
    names = [n.replace("{d}", d).replace("{fx}", ctx.fx_dir) for n in case.names]
    return dict(res, **{"class": classify_failure(names, msg), "message": msg})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spore", required=True, help="the spore CLI binary")
    ap.add_argument("--pythonpath", default="", help="the folder holding the spore package (build/python); "
                    "without it the Python cases are skipped")
    ap.add_argument("--full", action="store_true", default=os.environ.get("SPORE_RELIABILITY_FULL") == "1",
                    help="every case (default: the fast subset; also SPORE_RELIABILITY_FULL=1)")
    ap.add_argument("--only", default="", help="run the cases whose id matches this regex")
    ap.add_argument("--json", default="", help="write the report here")
    ap.add_argument("--work", default="", help="scratch folder (default: a new temporary one, removed after)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per case before it counts as a hang")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    a = ap.parse_args()

    all_cases = case_list.all_cases()
    ids = [c.id for c in all_cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit(f"duplicate case ids: {sorted(dup)}")
    chosen = [c for c in all_cases if (a.full or c.fast) and re.search(a.only, c.id)]
    if a.list:
        for c in chosen:
            print(f"{c.id:60s} {c.area:14s} {c.kind:5s} {c.expect:5s} {'fast' if c.fast else ''}")
        print(f"{len(chosen)} cases")
        return 0
    work = a.work or tempfile.mkdtemp(prefix="spore_reliability_")
    os.makedirs(work, exist_ok=True)
    has_py = bool(a.pythonpath) and os.path.exists(a.pythonpath)
    ctx = Ctx(os.path.abspath(a.spore), os.path.abspath(a.pythonpath) if has_py else "", work, a.timeout)
    print(f"reliability: {len(chosen)} of {len(all_cases)} cases ({'full' if a.full else 'fast subset'}), "
          f"work folder {work}", flush=True)
    results, t0 = [], time.time()
    try:
        for c in chosen:
            t = time.time()
            if c.kind == "py" and not has_py:
                r = {"class": "skipped", "message": "no --pythonpath (the _C module is not built)"}
            else:
                try:
                    r = run_case(ctx, c)
                except Exception as e:  # a bug in the harness itself: reported, not hidden
                    r = {"class": "harness_error", "message": f"{type(e).__name__}: {e}"}
            r.update(id=c.id, area=c.area, kind=c.kind, expect=c.expect, item=c.item, wall=round(time.time() - t, 2))
            results.append(r)
            mark = "" if r["class"] in ("ok", "clear") else "   <-- " + r["message"].replace("\n", " | ")[:300]
            print(f"  {r['class']:9s} {c.id}{mark}", flush=True)
    finally:
        ctx.close()
    elapsed = time.time() - t0
    report(results, elapsed, a)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    bad = [r for r in results if r["class"] in FAILING or r["class"] == "harness_error"]
    return 1 if bad else 0


def report(results, elapsed, a):
    classes = list(CLASSES) + (["harness_error"] if any(r["class"] == "harness_error" for r in results) else [])
    areas = sorted({r["area"] for r in results})
    count = {(ar, c): 0 for ar in areas for c in classes}
    for r in results:
        count[(r["area"], r["class"])] += 1
    w = max([len(x) for x in areas] + [5])
    head = f"{'area':{w}s} " + " ".join(f"{c:>9s}" for c in classes) + f" {'tried':>6s}"
    print("\n" + head + "\n" + "-" * len(head))
    for ar in areas:
        n = sum(count[(ar, c)] for c in classes)
        print(f"{ar:{w}s} " + " ".join(f"{count[(ar, c)]:9d}" for c in classes) + f" {n:6d}")
    tot = {c: sum(count[(ar, c)] for ar in areas) for c in classes}
    print("-" * len(head) + f"\n{'total':{w}s} " + " ".join(f"{tot[c]:9d}" for c in classes) +
          f" {len(results):6d}")
    tried = len(results) - tot["skipped"]
    print(f"\ntried {tried} / clear {tot['clear']} / ok {tot['ok']} / unclear {tot['unclear']} / crashes "
          f"{tot['crash']} / internal {tot['internal']} / wrong {tot['wrong']} / data lost {tot['data_lost']} / "
          f"hangs {tot['hang']} / skipped {tot['skipped']} ({elapsed:.0f} s)")
    others = [r for r in results if r["class"] not in ("ok", "clear")]
    if others:
        print("\nnot clear (for review):")
        for r in others:
            print(f"- [{r['class']}] {r['id']} (item {r['item'] or '-'}): {r['message'].strip()[:700]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"elapsed_s": round(elapsed, 1), "full": a.full, "counts": tot, "tried": tried,
                       "per_area": {ar: {c: count[(ar, c)] for c in classes} for ar in areas},
                       "cases": results}, f, indent=1)
        print(f"\nreport written to {a.json}")


if __name__ == "__main__":
    sys.exit(main())
