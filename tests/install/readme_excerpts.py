#!/usr/bin/env python3
"""Keeps README.md's C++ programs identical to examples/cpp, which tests/install/install_test.sh
builds against an installed Spore and runs.

  readme_excerpts.py README SOURCE_DIR EXAMPLE...

Every ```cpp block of README must start with a line naming its file, "// examples/cpp/NAME/main.cpp",
and the rest of the block must be a run of consecutive lines of that file, verbatim. Every EXAMPLE
(a folder of examples/cpp) must be shown by at least one block. Exit 1 with the differences otherwise.
"""
import re
import sys
from pathlib import Path


def blocks(text):
    """(line number, lines) of each ```cpp block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            yield start + 1, lines[start:j]
            i = j
        i += 1


def main():
    readme, src, examples = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    errors, shown = [], set()
    for line_no, body in blocks(readme.read_text()):
        m = re.fullmatch(r"// (examples/cpp/([^/\s]+)/[^\s]+)", body[0].strip()) if body else None
        if not m:
            errors.append(f"README.md:{line_no}: a C++ block must start with '// examples/cpp/NAME/main.cpp'")
            continue
        path = src / m.group(1)
        if not path.is_file():
            errors.append(f"README.md:{line_no}: {m.group(1)} does not exist")
            continue
        file_lines = path.read_text().split("\n")
        excerpt = body[1:]
        n = len(excerpt)
        if n == 0 or not any(file_lines[k : k + n] == excerpt for k in range(len(file_lines) - n + 1)):
            # Show the first README line that the file does not have where it should.
            first = next((k for k, l in enumerate(file_lines) if excerpt and l == excerpt[0]), None)
            where = "its first line is not in the file"
            if first is not None:
                for d, l in enumerate(excerpt):
                    if first + d >= len(file_lines) or file_lines[first + d] != l:
                        where = f"README line {line_no + 1 + d} differs: {l!r}"
                        break
            errors.append(f"README.md:{line_no}: the block is not a verbatim excerpt of {m.group(1)} ({where})")
            continue
        shown.add(m.group(2))
        print(f"README.md:{line_no}: {n} lines = {m.group(1)}")
    for name in examples:
        if name not in shown:
            errors.append(f"README.md shows no excerpt of examples/cpp/{name}")
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
