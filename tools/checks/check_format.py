#!/usr/bin/env python3
"""The format rule: every C++ and CUDA file of the repository is as clang-format (.clang-format:
Google style, 100 columns) writes it. Run by ctest (format_check); exits 1 and lists each file that
differs with its first differing line and the command that fixes it.

    python3 tools/checks/check_format.py [REPO_ROOT]        # every tracked .h/.cpp/.cu/.cuh file
    python3 tools/checks/check_format.py --files F [F ...]  # just these (the check's own test)
    python3 tools/checks/check_format.py --fix [REPO_ROOT]  # rewrite them in place
"""
import difflib
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
# Generated or vendored text that is not ours to format.
SKIP = ("tests/fuzz/corpus/",)


def clang_format():
    for name in ("clang-format", "clang-format-14", "clang-format-15", "clang-format-16"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("check_format: clang-format not found; install Debian's clang-format (scripts/setup.sh does)")


def tracked_files(root):
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    files = [f for f in out.decode().split("\0") if f.endswith(SUFFIXES) and not f.startswith(SKIP)]
    return [root / f for f in files if (root / f).is_file()]


def first_difference(path, formatted):
    original = path.read_text(errors="replace").splitlines()
    for line in difflib.unified_diff(original, formatted.splitlines(), lineterm="", n=0):
        if line.startswith("@@"):
            return line.split()[1].lstrip("-").split(",")[0]
    return "?"


def main(argv):
    fix = "--fix" in argv
    argv = [a for a in argv if a != "--fix"]
    cf = clang_format()
    if argv and argv[0] == "--files":
        root, files = Path.cwd(), [Path(f).resolve() for f in argv[1:]]
        style_root = Path(__file__).resolve().parents[2]
    else:
        root = Path(argv[0] if argv else Path(__file__).resolve().parents[2]).resolve()
        files, style_root = tracked_files(root), root
    style = f"--style=file:{style_root / '.clang-format'}"

    def check(path):
        # --assume-filename lets a fixture with another suffix be read as C++.
        res = subprocess.run([cf, style, f"--assume-filename={path.with_suffix('.cpp').name}"],
                             stdin=path.open("rb"), capture_output=True)
        formatted = res.stdout.decode(errors="replace")
        if res.returncode != 0:
            return path, f"clang-format failed: {res.stderr.decode(errors='replace').strip()}", None
        if formatted == path.read_text(errors="replace"):
            return path, None, None
        return path, first_difference(path, formatted), formatted

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(check, files))
    bad = [(p, line, text) for p, line, text in results if line is not None]
    if fix:
        for p, _, text in bad:
            if text is not None:
                p.write_text(text)
        print(f"format: rewrote {len(bad)} of {len(files)} files")
        return 0
    if not bad:
        print(f"format: {len(files)} files checked, each as clang-format writes it")
        return 0
    for p, line, _ in bad:
        rel = p.relative_to(root) if root in p.parents else p
        print(f"{rel}:{line}: differs from clang-format's output")
    print(f"format: {len(bad)} of {len(files)} files differ; fix with `python3 tools/checks/check_format.py --fix` "
          f"(or clang-format -i FILE), then commit")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
