"""The dataset pipeline (mindspore.dataset) over the C++ engine (spore/data): sources, map / batch /
shuffle / repeat / ..., tuple and dict iterators.

Rows reach Python code as numpy arrays (a map function, a per_batch_map) and iterators give
ms.Tensor rows (numpy with output_numpy=True). Python callables run on the engine's worker threads
and hold the GIL only while they run, so C++ transforms of the same pipeline are not serialised
behind them.

Differences from MindSpore: labels of MnistDataset / Cifar10Dataset are int32 (MindSpore: uint32);
python_multiprocessing=True runs Python callables in worker processes (dataset/_mp.py);
prefetch_size sets the engine-wide prefetch
(ds.config.set_prefetch_size).
"""
import os

import numpy as np

from .. import _C
from ..common.tensor import Tensor
from . import _mp


def _refuse(who, **given):
    """Arguments the engine has no counterpart for: refused when not at MindSpore's default."""
    for name, (value, default) in given.items():
        defaults = default if isinstance(default, tuple) else (default,)
        if not any(value is d or value == d for d in defaults):
            raise NotImplementedError(f"For '{who}', {name}={value!r} is not supported by Spore's data engine "
                                      f"(no dataset cache server, map callbacks or offload); drop it")


def _check_rowsize(who, max_rowsize):
    # MindSpore's shared-memory size per row for multiprocessing; Spore's processes pickle rows, so
    # any size works. Validated as MindSpore does.
    if max_rowsize is not None and not (isinstance(max_rowsize, (int, list, tuple))):
        raise TypeError(f"For '{who}', 'max_rowsize' must be an int or a list of ints, got {max_rowsize!r}")


def _config_workers():
    from . import config
    return config.get_num_parallel_workers()


def _is_python_callable(op):
    from .transforms import TensorOperation
    return callable(op) and not (isinstance(op, TensorOperation) and getattr(op, "_op", None) is not None)


def _cols(c):
    if c is None:
        return []
    return [c] if isinstance(c, str) else list(c)


def _n(v, default):
    return default if v is None else int(v)


def _workers(v):
    """num_parallel_workers: given, else ds.config.set_num_parallel_workers's, else 0 (the engine's)."""
    from . import config
    return int(v) if v is not None else (config._workers[0] or 0)


class Dataset:
    """A pipeline node; every operation returns a new Dataset."""

    def __init__(self, ds, sources=()):
        self._ds = ds
        self._sources = tuple(sources)  # Python objects the C++ pipeline calls (kept alive here)

    def _wrap(self, ds, extra=()):
        return Dataset(ds, self._sources + tuple(extra))

    # ---- pipeline operations ----
    def map(self, operations, input_columns=None, output_columns=None, column_order=None, num_parallel_workers=None,
            python_multiprocessing=False, cache=None, callbacks=None, max_rowsize=16, offload=None):
        """Applies operations (C++ transforms and Python callables) to input_columns. With
        python_multiprocessing=True the Python callables run in num_parallel_workers processes
        (dataset/_mp.py); C++ transforms stay in the engine's threads."""
        _refuse("map", cache=(cache, None), callbacks=(callbacks, None), offload=(offload, (None, False)))
        _check_rowsize("map", max_rowsize)
        ops = list(operations) if isinstance(operations, (list, tuple)) else [operations]
        workers = _workers(num_parallel_workers)
        if python_multiprocessing:
            n = workers if workers > 0 else _config_workers()
            ops = [_mp.ProcessCall(op, n, "Dataset.map") if _is_python_callable(op) else op for op in ops]
        ds = self._ds.map(ops, _cols(input_columns), _cols(output_columns), workers)
        if column_order is not None:
            ds = ds.project(_cols(column_order))
        return self._wrap(ds, ops)

    def batch(self, batch_size, drop_remainder=False, num_parallel_workers=None, per_batch_map=None,
              input_columns=None, output_columns=None, column_order=None, pad_info=None,
              python_multiprocessing=False, max_rowsize=16):
        """Batches rows; per_batch_map runs on each batch (in num_parallel_workers worker processes
        with python_multiprocessing=True). Batching itself is one C++ stage: a num_parallel_workers
        that can only change its speed warns and gives the same batches."""
        _check_rowsize("batch", max_rowsize)
        workers = _n(num_parallel_workers, 0)
        if python_multiprocessing and per_batch_map is None:
            raise NotImplementedError("For 'Dataset.batch', python_multiprocessing=True applies to a per_batch_map; "
                                      "without one, batching is a single C++ stage (drop it)")
        if per_batch_map is not None and python_multiprocessing:
            per_batch_map = _mp.ProcessCall(per_batch_map, workers if workers > 0 else _config_workers(),
                                            "Dataset.batch")
        elif workers > 1:
            import warnings
            warnings.warn(f"For 'Dataset.batch', num_parallel_workers={workers}: batching is one C++ stage in Spore "
                          f"(and a per_batch_map runs on one thread unless python_multiprocessing=True); the "
                          f"batches are the same", UserWarning, stacklevel=2)
        pads = {}
        for k, v in (pad_info or {}).items():
            shape, value = v if v is not None else (None, 0)
            pads[k] = (None if shape is None else list(shape), float(value or 0))
        fn = None
        if per_batch_map is not None:
            def fn(*args, _user=per_batch_map):
                return _user(*args[:-1], BatchInfo(*args[-1]))
        ds = self._ds.batch(int(batch_size), bool(drop_remainder), fn, _cols(input_columns), pads)
        if output_columns is not None and input_columns is not None:
            ds = ds.rename(_cols(input_columns), _cols(output_columns))
        if column_order is not None:
            ds = ds.project(_cols(column_order))
        return self._wrap(ds, (per_batch_map,))

    def shuffle(self, buffer_size):
        return self._wrap(self._ds.shuffle(int(buffer_size)))

    def repeat(self, count=None):
        if count is None or count == -1:
            raise ValueError("Dataset.repeat: an endless repeat has no size here; loop over epochs (or give a count)")
        return self._wrap(self._ds.repeat(int(count)))

    def take(self, count=-1):
        return self if count == -1 else self._wrap(self._ds.take(int(count)))

    def skip(self, count):
        return self._wrap(self._ds.skip(int(count)))

    def project(self, columns):
        return self._wrap(self._ds.project(_cols(columns)))

    def rename(self, input_columns, output_columns):
        return self._wrap(self._ds.rename(_cols(input_columns), _cols(output_columns)))

    def zip(self, datasets):
        others = datasets if isinstance(datasets, (list, tuple)) else [datasets]
        ds, srcs = self._ds, list(self._sources)
        for o in others:
            ds = ds.zip(o._ds)
            srcs.extend(o._sources)
        return Dataset(ds, srcs)

    def concat(self, datasets):
        others = datasets if isinstance(datasets, (list, tuple)) else [datasets]
        ds, srcs = self._ds, list(self._sources)
        for o in others:
            ds = ds.concat(o._ds)
            srcs.extend(o._sources)
        return Dataset(ds, srcs)

    def __add__(self, other):
        return self.concat(other)

    def split(self, sizes, randomize=True):
        return [self._wrap(d) for d in self._ds.split([float(s) for s in sizes], bool(randomize))]

    # ---- information ----
    def get_dataset_size(self):
        return self._ds.get_dataset_size()

    def get_batch_size(self):
        return self._ds.get_batch_size()

    def get_col_names(self):
        return list(self._ds.get_column_names())

    def output_shapes(self, estimate=False):  # estimate: the first row's shapes either way
        row = next(iter(self.create_tuple_iterator(output_numpy=True)))
        return [list(a.shape) for a in row]

    def output_types(self):
        row = next(iter(self.create_tuple_iterator(output_numpy=True)))
        return [a.dtype for a in row]

    def __len__(self):
        return self.get_dataset_size()

    # ---- iteration ----
    def create_tuple_iterator(self, columns=None, num_epochs=-1, output_numpy=False, do_copy=True):
        """Rows as lists. num_epochs: passes before the iterator ends (-1: any number);
        do_copy=False is MindSpore's zero-copy Tensor, which Spore's rows always are."""
        ds = self if columns is None else self.project(columns)
        return _Iterator(ds, output_numpy, None, num_epochs)

    def create_dict_iterator(self, num_epochs=-1, output_numpy=False, do_copy=True):
        return _Iterator(self, output_numpy, self.get_col_names(), num_epochs)

    def __iter__(self):
        return iter(self.create_tuple_iterator())

    def device_que(self, *args, **kwargs):
        raise NotImplementedError("Dataset.device_que (MindSpore's device queue for sink mode) is not needed in "
                                  "Spore: Model.train(dataset_sink_mode=True) takes the dataset itself")


class BatchInfo:
    """What per_batch_map gets last: get_batch_num(), get_epoch_num()."""

    def __init__(self, batch_num, epoch_num):
        self._b, self._e = batch_num, epoch_num

    def get_batch_num(self):
        return self._b

    def get_epoch_num(self):
        return self._e


class _Iterator:
    """One pass per `for` loop: after the end of a pass, the next loop starts a new epoch."""

    def __init__(self, ds, output_numpy, names, num_epochs=-1):
        if not isinstance(num_epochs, int) or not (num_epochs == -1 or num_epochs >= 1):
            raise ValueError(f"Dataset iterator: num_epochs must be -1 (any number) or >= 1, got {num_epochs!r}")
        self._ds, self._numpy, self._names, self._it = ds, output_numpy, names, None
        self._epochs_left = num_epochs  # passes this iterator may still start (-1: no limit)

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            if self._epochs_left == 0:
                raise RuntimeError(f"Dataset iterator: the num_epochs passes given to create_*_iterator are done; "
                                   f"create a new iterator (or pass num_epochs=-1)")
            if self._epochs_left > 0:
                self._epochs_left -= 1
            self._it = self._ds._ds.create_tuple_iterator()
        row = self._it.next()
        if row is None:
            self._it = None
            raise StopIteration
        if self._numpy:
            row = [t.asnumpy() for t in row]
        elif _C.current_device() != "CPU":  # fed to a network on the device: moved there (MindSpore)
            row = [t._to_current_device() for t in row]
        if self._names is not None:
            return dict(zip(self._names, row))
        return row

    def stop(self):
        self._it = None

    def __del__(self):
        self._it = None


# ---- sources -------------------------------------------------------------------------------------
def _source_args(num_samples, shuffle, num_shards, shard_id, sampler, workers, default_shuffle=True):
    if sampler is not None and not isinstance(sampler, _C.Sampler):  # a samplers.Sampler
        sampler = getattr(sampler, "_sampler", sampler)
    sh = default_shuffle if shuffle is None else bool(shuffle)
    if sampler is not None:
        sh = False
    return (_n(num_samples, -1), sh, _n(num_shards, 1), _n(shard_id, 0), sampler, _workers(workers))


def MnistDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                 num_shards=None, shard_id=None, cache=None):
    """MNIST / Fashion-MNIST IDX files: columns "image" uint8 (28, 28, 1), "label" int32. shuffle
    defaults to True as MindSpore's."""
    _refuse("MnistDataset", cache=(cache, None))
    return Dataset(_C.MnistDataset(str(dataset_dir), usage or "all",
                                   *_source_args(num_samples, shuffle, num_shards, shard_id, sampler,
                                                 num_parallel_workers)))


def Cifar10Dataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                   num_shards=None, shard_id=None, cache=None):
    _refuse("Cifar10Dataset", cache=(cache, None))
    return Dataset(_C.Cifar10Dataset(str(dataset_dir), usage or "all",
                                     *_source_args(num_samples, shuffle, num_shards, shard_id, sampler,
                                                   num_parallel_workers)))


def Cifar100Dataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                    num_shards=None, shard_id=None, cache=None):
    _refuse("Cifar100Dataset", cache=(cache, None))
    return Dataset(_C.Cifar100Dataset(str(dataset_dir), usage or "all",
                                      *_source_args(num_samples, shuffle, num_shards, shard_id, sampler,
                                                    num_parallel_workers)))


def CSVDataset(dataset_files, field_delim=",", column_defaults=None, column_names=None, num_samples=None,
               num_parallel_workers=None, shuffle=True, num_shards=None, shard_id=None, cache=None):
    """CSV files, one column per field. column_defaults give each column's type (int, float or str)
    and the value of an empty field; without column_names the first line names the columns.
    shuffle defaults to True (MindSpore's Shuffle.GLOBAL)."""
    _refuse("CSVDataset", cache=(cache, None))
    files = [dataset_files] if isinstance(dataset_files, (str, bytes, os.PathLike)) else list(dataset_files)
    ns, sh, nsh, sid, _, w = _source_args(num_samples, shuffle, num_shards, shard_id, None, num_parallel_workers)
    return Dataset(_C.CSVDataset([os.fspath(f) for f in files], str(field_delim), list(column_defaults or []),
                                 [str(c) for c in (column_names or [])], ns, sh, nsh, sid, w))


def ImageFolderDataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                       extensions=None, class_indexing=None, decode=False, num_shards=None, shard_id=None,
                       cache=None, decrypt=None):
    _refuse("ImageFolderDataset", cache=(cache, None), decrypt=(decrypt, None))
    return Dataset(_C.ImageFolderDataset(str(dataset_dir), list(extensions or []), dict(class_indexing or {}),
                                         bool(decode), *_source_args(num_samples, shuffle, num_shards, shard_id,
                                                                     sampler, num_parallel_workers)))


def CocoDataset(dataset_dir, annotation_file, task="Detection", num_samples=None, num_parallel_workers=None,
                shuffle=None, decode=False, sampler=None, num_shards=None, shard_id=None, cache=None,
                extra_metadata=False, decrypt=None):
    _refuse("CocoDataset", cache=(cache, None), extra_metadata=(extra_metadata, False), decrypt=(decrypt, None))
    return Dataset(_C.CocoDataset(str(dataset_dir), str(annotation_file), task, bool(decode),
                                  *_source_args(num_samples, shuffle, num_shards, shard_id, sampler,
                                                num_parallel_workers)))


def GeneratorDataset(source, column_names=None, column_types=None, schema=None, num_samples=None,
                     num_parallel_workers=1, shuffle=None, sampler=None, num_shards=None, shard_id=None,
                     python_multiprocessing=True, max_rowsize=None, prefetch_size=None):
    """Rows from a Python source: random access (__getitem__ and __len__, returning a tuple of
    arrays), an iterable, or a generator function. shuffle defaults to True for random-access
    sources (as MindSpore). prefetch_size sets the engine's prefetch queue (rows per stage)."""
    if column_names is None:
        raise ValueError("GeneratorDataset: column_names is required")
    if column_types is not None or schema is not None:
        raise NotImplementedError("For 'GeneratorDataset', column_types and schema are not supported: the columns "
                                  "take the dtypes of the arrays the source returns; cast them in the source or "
                                  "with .map(transforms.TypeCast(...), input_columns=...)")
    _check_rowsize("GeneratorDataset", max_rowsize)
    random_access = hasattr(source, "__getitem__") and hasattr(source, "__len__")
    kept = (source,)
    if python_multiprocessing and random_access and num_parallel_workers is not None and num_parallel_workers > 1:
        # MindSpore's rule: a random-access source with several workers reads rows in processes
        source = _mp.ProcessSource(source, num_parallel_workers, "GeneratorDataset")
        kept = (kept[0], source)
    if not random_access and shuffle:
        raise ValueError("GeneratorDataset: shuffle needs a random-access source (__getitem__ and __len__)")
    if prefetch_size is not None:
        _C.set_prefetch_size(int(prefetch_size))
    args = _source_args(num_samples, shuffle, num_shards, shard_id, sampler, num_parallel_workers,
                        default_shuffle=random_access)
    return Dataset(_C.GeneratorDataset(source, _cols(column_names), *args), kept)


def NumpySlicesDataset(data, column_names=None, num_samples=None, num_parallel_workers=1, shuffle=None,
                       sampler=None, num_shards=None, shard_id=None):
    """Rows sliced along the first dimension of arrays: a list / tuple of arrays, a dict
    {column: array} or one array. shuffle defaults to True (as MindSpore). num_parallel_workers:
    the rows are slices of arrays in memory, read by one C++ stage (any value gives the same rows)."""
    if num_parallel_workers is not None and (not isinstance(num_parallel_workers, int) or num_parallel_workers < 1):
        raise ValueError(f"For 'NumpySlicesDataset', 'num_parallel_workers' must be an int >= 1, "
                         f"got {num_parallel_workers!r}")
    if num_parallel_workers is not None and num_parallel_workers > 1:
        import warnings
        warnings.warn(f"For 'NumpySlicesDataset', num_parallel_workers={num_parallel_workers}: the rows are slices "
                      f"of in-memory arrays, read by one C++ stage; the rows are the same", UserWarning, stacklevel=2)
    if isinstance(data, dict):
        names = list(data.keys())
        cols = list(data.values())
    elif isinstance(data, (list, tuple)) and len(data) and not np.isscalar(data[0]) and \
            isinstance(data[0], (np.ndarray, Tensor, list, tuple)) and not isinstance(data, np.ndarray):
        cols = list(data) if isinstance(data, tuple) or isinstance(data[0], (np.ndarray, Tensor)) else [data]
        names = None
    else:
        cols, names = [data], None
    cols = [c if isinstance(c, Tensor) else Tensor(np.ascontiguousarray(np.asarray(c))) for c in cols]
    if column_names is not None:
        names = _cols(column_names)
    if names is None:
        names = [f"column_{i}" for i in range(len(cols))]
    ds = Dataset(_C.TensorDataset(cols, names))
    if num_shards is not None and num_shards > 1:
        n = cols[0].shape[0] // num_shards
        ds = ds.skip(shard_id * n).take(n)
    if (shuffle is None or shuffle) and sampler is None:
        ds = ds.shuffle(cols[0].shape[0])
    if num_samples is not None:
        ds = ds.take(num_samples)
    return ds
