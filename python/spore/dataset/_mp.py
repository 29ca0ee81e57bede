"""python_multiprocessing=True: Python callables of a pipeline (a map function, a per_batch_map,
a random-access GeneratorDataset source) run in a pool of worker processes, as MindSpore's do.

The engine's worker threads still drive the pipeline: each one hands its row to a process and
waits for the answer without holding the GIL, so num_parallel_workers rows are computed at once,
in as many processes, free of the GIL. The pool is forked when the pipeline is built (from the
thread that builds it), so the callables need not be picklable (lambdas and closures work); their
arguments and results (numpy arrays, tuples of them) are pickled. A process inherits the program
as it was when the pipeline was built; it runs the callable on numpy arrays and must not call
Spore's ops (the parent's kernel thread pool does not exist in a forked child). Processes end with
the pipeline (or the program)."""
import itertools
import multiprocessing
import os
import weakref

_FUNCS = {}  # key -> callable; the forked workers inherit it
_keys = itertools.count()


def _call(key, args):
    return _FUNCS[key](*args)


def _getitem(key, index):
    return _FUNCS[key][index]


class _Pool:
    def __init__(self, obj, workers, who):
        if not hasattr(os, "fork"):
            raise NotImplementedError(f"{who}: python_multiprocessing=True needs fork(), which this platform lacks; "
                                      f"pass python_multiprocessing=False (worker threads)")
        self.key = next(_keys)
        _FUNCS[self.key] = obj
        self.pool = multiprocessing.get_context("fork").Pool(max(1, int(workers)))
        weakref.finalize(self, _close, self.pool, self.key)

    def pids(self):
        return [p.pid for p in self.pool._pool]


def _close(pool, key):
    pool.terminate()
    _FUNCS.pop(key, None)


class ProcessCall(_Pool):
    """A map function / per_batch_map run in the pool; called by the engine's threads."""

    def __call__(self, *args):
        return self.pool.apply(_call, (self.key, args))


class ProcessSource(_Pool):
    """A random-access GeneratorDataset source whose __getitem__ runs in the pool."""

    def __init__(self, source, workers, who):
        super().__init__(source, workers, who)
        self._len = len(source)

    def __len__(self):
        return self._len

    def __getitem__(self, index):
        return self.pool.apply(_getitem, (self.key, int(index)))
