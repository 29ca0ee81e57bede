"""ms.dataset: GeneratorDataset (random access, iterable, generator function), NumpySlicesDataset,
MnistDataset, map with C++ transforms and Python callables, batch, shuffle, iterators."""
import os
import threading

import numpy as np
import pytest

import spore as ms
from spore import dataset as ds
from spore.dataset import transforms, vision

FASHION = "/usr/share/datasets/fashion-mnist"


class Source:
    """Random access: (image, label) rows."""

    def __init__(self, n=10):
        self.n = n

    def __getitem__(self, i):
        return np.full((2, 3), i, np.float32), np.array(i % 3, np.int32)

    def __len__(self):
        return self.n


def test_generator_random_access_in_order():
    d = ds.GeneratorDataset(Source(), ["image", "label"], shuffle=False)
    assert d.get_dataset_size() == 10 and d.get_col_names() == ["image", "label"]
    rows = list(d.create_tuple_iterator(output_numpy=True))
    assert len(rows) == 10
    for i, (img, lab) in enumerate(rows):
        np.testing.assert_array_equal(img, np.full((2, 3), i, np.float32))
        assert lab == i % 3 and lab.dtype == np.int32


def test_generator_iterable_and_function():
    def gen():
        for i in range(5):
            yield (np.array([i, i * i], np.int64),)

    d = ds.GeneratorDataset(gen, ["x"])
    assert [r[0].asnumpy().tolist() for r in d] == [[i, i * i] for i in range(5)]
    it = ds.GeneratorDataset([(np.array(i),) for i in range(4)], ["x"], shuffle=False)
    assert [int(r["x"].asnumpy()) for r in it.create_dict_iterator()] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="column_names"):
        ds.GeneratorDataset(gen)


def test_generator_error_surfaces_as_python_exception():
    class Bad:
        def __getitem__(self, i):
            raise KeyError(f"no sample {i}")

        def __len__(self):
            return 3

    d = ds.GeneratorDataset(Bad(), ["x"], shuffle=False)
    with pytest.raises(Exception, match="no sample 0"):
        list(d)


def test_shuffle_is_seeded_and_reshuffles_each_epoch():
    ms.set_seed(11)
    d = ds.GeneratorDataset(Source(20), ["image", "label"], shuffle=True)
    it = d.create_tuple_iterator(output_numpy=True)
    e1 = [int(r[0][0, 0]) for r in it]
    e2 = [int(r[0][0, 0]) for r in it]  # the same iterator: a new epoch per loop
    assert sorted(e1) == list(range(20)) and e1 != list(range(20)) and e1 != e2
    ms.set_seed(11)
    d2 = ds.GeneratorDataset(Source(20), ["image", "label"], shuffle=True)
    assert [int(r[0][0, 0]) for r in d2.create_tuple_iterator(output_numpy=True)] == e1


def test_map_with_python_and_cpp_ops_and_batch():
    d = ds.GeneratorDataset(Source(10), ["image", "label"], shuffle=False)
    d = d.map(operations=[lambda x: x * 2, vision.Rescale(0.5, 1.0)], input_columns="image")
    d = d.map(operations=transforms.TypeCast(ms.float32), input_columns="label")
    d = d.batch(4, drop_remainder=False)
    assert d.get_dataset_size() == 3
    batches = list(d.create_tuple_iterator())
    assert [tuple(b[0].shape) for b in batches] == [(4, 2, 3), (4, 2, 3), (2, 2, 3)]
    np.testing.assert_allclose(batches[1][0].asnumpy()[:, 0, 0], [5.0, 6.0, 7.0, 8.0])  # i * 2 * 0.5 + 1
    assert batches[0][1].dtype == ms.float32


def test_map_python_multi_column_and_per_batch_map():
    d = ds.NumpySlicesDataset({"a": np.arange(6, dtype=np.float32), "b": np.arange(6, dtype=np.float32) * 10},
                              shuffle=False)
    d = d.map(operations=lambda a, b: (a + b, a - b), input_columns=["a", "b"], output_columns=["s", "d"])
    rows = list(d.create_dict_iterator(output_numpy=True))
    assert set(rows[0]) == {"s", "d"}
    np.testing.assert_allclose([r["s"] for r in rows], np.arange(6) * 11)

    def per_batch(s, d, info):
        return [x * 0 + len(s) for x in s], d

    b = d.batch(4, per_batch_map=per_batch, input_columns=["s", "d"])
    out = list(b.create_tuple_iterator(output_numpy=True))
    np.testing.assert_array_equal(out[0][0], [4, 4, 4, 4])
    np.testing.assert_array_equal(out[1][0], [2, 2])


def test_numpy_slices_shapes_and_take_skip_repeat():
    x = np.random.default_rng(0).standard_normal((12, 3)).astype(np.float32)
    y = np.arange(12, dtype=np.int32)
    d = ds.NumpySlicesDataset((x, y), column_names=["x", "y"], shuffle=False)
    assert d.get_dataset_size() == 12
    rows = list(d.skip(2).take(3).create_tuple_iterator(output_numpy=True))
    np.testing.assert_array_equal([r[1] for r in rows], [2, 3, 4])
    np.testing.assert_array_equal(rows[0][0], x[2])
    assert d.repeat(2).get_dataset_size() == 24
    assert ds.NumpySlicesDataset(x, shuffle=False).get_col_names() == ["column_0"]


def test_python_map_runs_on_worker_threads_in_parallel_with_cpp():
    seen = set()

    def f(x):
        seen.add(threading.get_ident())
        return x + 1

    d = ds.GeneratorDataset(Source(64), ["image", "label"], shuffle=False)
    d = d.map(operations=[f], input_columns="image", num_parallel_workers=4).batch(8)
    total = sum(float(b[0].asnumpy().sum()) for b in d)
    assert total == sum((i + 1) * 6 for i in range(64))
    assert threading.get_ident() not in seen  # the engine's threads ran the Python function


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist not installed")
def test_mnist_dataset_and_vision():
    d = ds.MnistDataset(FASHION, usage="test", num_samples=100, shuffle=False)
    assert d.get_dataset_size() == 100
    img, label = next(iter(d.create_tuple_iterator(output_numpy=True)))
    assert img.shape == (28, 28, 1) and img.dtype == np.uint8 and 0 <= label < 10
    d = d.map([vision.Rescale(1 / 255.0, 0.0), vision.HWC2CHW()], input_columns="image").batch(32)
    first = next(iter(d))
    assert tuple(first[0].shape) == (32, 1, 28, 28) and first[0].dtype == ms.float32
    np.testing.assert_allclose(first[0].asnumpy()[0, 0], img[:, :, 0] / 255.0, rtol=1e-6)
    # a transform called directly
    out = vision.Normalize([0.5], [0.25])(img.astype(np.float32) / 255)
    np.testing.assert_allclose(out, (img / 255.0 - 0.5) / 0.25, rtol=1e-5, atol=1e-6)
