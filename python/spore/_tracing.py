"""Errors raised while a Python construct is traced in GRAPH_MODE name the user's line."""
import os
import sys
import traceback

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def user_frame(tb=None):
    """(filename, lineno, line) of the innermost frame outside the spore package."""
    frames = traceback.extract_tb(tb) if tb is not None else traceback.extract_stack()[:-1]
    for fr in reversed(frames):
        if not os.path.abspath(fr.filename).startswith(_PKG_DIR):
            return fr.filename, fr.lineno, (fr.line or "").strip()
    return None


def where(depth=2):
    """'file.py:12: code' for the caller `depth` frames up that is outside the package."""
    f = sys._getframe(depth)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR):
        f = f.f_back
    if f is None:
        return "<unknown>"
    import linecache
    return f"{f.f_code.co_filename}:{f.f_lineno}: {linecache.getline(f.f_code.co_filename, f.f_lineno).strip()}"


def trace_error(what, alternative, depth=3):
    return RuntimeError(f"[GRAPH_MODE] {what} cannot be traced: while a construct is traced, a tensor has no value "
                        f"yet (it is only known when the compiled graph runs). {alternative}\n"
                        f"  at {where(depth)}")


def annotate(exc):
    """Adds the user's line to an exception raised under tracing (once)."""
    if getattr(exc, "_spore_annotated", False) or not exc.args:
        return exc
    fr = user_frame(exc.__traceback__)
    if fr is not None and isinstance(exc.args[0], str) and "  at " not in exc.args[0]:
        exc.args = (f"{exc.args[0]}\n  at {fr[0]}:{fr[1]}: {fr[2]} (while tracing for GRAPH_MODE)",) + exc.args[1:]
    exc._spore_annotated = True
    return exc
