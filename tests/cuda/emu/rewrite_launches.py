#!/usr/bin/env python3
"""Turns a CUDA source into C++ the CUDA emulator compiles (docs/cuda.md, "The emulator").

The only CUDA syntax a host compiler cannot read is the launch, `kernel<T, U><<<grid, block,
shared, stream>>>(args)`; everything else is handled by the emulator's header (emu_kernel.h,
included first by the compiler). Each launch becomes

    ::spore::emu::launch(#kernel, kernel<T, U>, grid, block, shared, stream)(args)

which runs the kernel's threads on the host, in stream order. The kernel expression is found by
walking back from `<<<` over one name with its template arguments and `::` qualifiers.

usage: rewrite_launches.py in.cu out.cpp
"""
import re
import sys


def kernel_start(src, end):
    """Index where the kernel expression ending just before `end` begins."""
    i = end
    while i > 0 and src[i - 1].isspace():
        i -= 1
    while True:
        if i > 0 and src[i - 1] == ">":  # template arguments: back to the matching '<'
            depth = 0
            while i > 0:
                i -= 1
                if src[i] == ">":
                    depth += 1
                elif src[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
        m = re.search(r"[A-Za-z_][A-Za-z_0-9]*$", src[:i])
        if not m:
            raise SystemExit(f"rewrite_launches: no kernel name before offset {end}")
        i = m.start()
        if src[:i].endswith("::"):
            i -= 2
            continue
        return i


def rewrite(src):
    out, pos = [], 0
    for m in re.finditer(r"<<<", src):
        start = kernel_start(src, m.start())
        close = src.index(">>>", m.end())
        kernel = src[start:m.start()].strip()
        config = src[m.end():close].strip()
        paren = close + 3
        while src[paren].isspace():
            paren += 1
        if src[paren] != "(":
            raise SystemExit(f"rewrite_launches: expected '(' after the launch of {kernel}")
        if start < pos:
            raise SystemExit("rewrite_launches: overlapping launches")
        name = re.sub(r"\s+", " ", kernel).replace('"', "")
        out.append(src[pos:start])
        call = f'::spore::emu::launch("{name}", {kernel}, {config})'
        # Keep every line where it was, so errors and debuggers point into the .cu file.
        call += "\n" * (src.count("\n", start, paren) - call.count("\n"))
        out.append(call)
        pos = paren
    out.append(src[pos:])
    return "".join(out)


def main():
    src_path, dst_path = sys.argv[1], sys.argv[2]
    with open(src_path) as f:
        src = f.read()
    text = f'#line 1 "{src_path}"\n' + rewrite(src)
    try:
        with open(dst_path) as f:
            if f.read() == text:
                return  # unchanged: keep the timestamp, so nothing recompiles
    except FileNotFoundError:
        pass
    with open(dst_path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
