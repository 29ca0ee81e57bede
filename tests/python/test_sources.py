"""The file sources from Python (Cifar10Dataset, CSVDataset, ImageFolderDataset, CocoDataset) on files written
here, samplers, and more of amp (auto_mixed_precision, DynamicLossScaleManager, the loss-scale
cell built directly)."""
import json

import numpy as np
import pytest

import spore as ms
from spore import dataset as ds
from spore import nn


def write_cifar10(d, n_per_file=4):
    rng = np.random.default_rng(0)
    images, labels = [], []
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        recs = []
        for _ in range(n_per_file):
            lab = rng.integers(0, 10)
            img = rng.integers(0, 256, (3, 32, 32), dtype=np.uint8)  # planes R, G, B
            recs.append(np.concatenate([[lab], img.reshape(-1)]).astype(np.uint8))
            if name != "test_batch.bin":
                images.append(img.transpose(1, 2, 0))
                labels.append(lab)
        np.concatenate(recs).tofile(d / name)
    return images, labels


def test_cifar10_dataset(tmp_path):
    images, labels = write_cifar10(tmp_path)
    d = ds.Cifar10Dataset(str(tmp_path), usage="train", shuffle=False)
    assert d.get_dataset_size() == 20 and d.get_col_names() == ["image", "label"]
    rows = list(d.create_tuple_iterator(output_numpy=True))
    for (img, lab), ref_img, ref_lab in zip(rows, images, labels):
        np.testing.assert_array_equal(img, ref_img)
        assert lab == ref_lab
    assert ds.Cifar10Dataset(str(tmp_path), usage="test").get_dataset_size() == 4
    sampled = ds.Cifar10Dataset(str(tmp_path), usage="train", sampler=ds.SubsetSampler([3, 1]))
    got = [r[0] for r in sampled.create_tuple_iterator(output_numpy=True)]
    np.testing.assert_array_equal(got[0], images[3])
    np.testing.assert_array_equal(got[1], images[1])
    with pytest.raises(OSError, match=r"\[Cifar10Dataset\] .*missing is not a directory"):
        ds.Cifar10Dataset(str(tmp_path / "missing"), usage="train")


def test_csv_dataset(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("7,0.5,x\n,,\n-3,1e3,\"quoted, comma\"\n")
    d = ds.CSVDataset(str(f), column_defaults=[-1, 2.5, "none"], column_names=["i", "f", "s"], shuffle=False)
    assert d.get_col_names() == ["i", "f", "s"]
    rows = list(d.create_tuple_iterator(output_numpy=True))
    assert [int(r[0]) for r in rows] == [7, -1, -3]  # an empty field takes the column's default
    assert [float(r[1]) for r in rows] == [0.5, 2.5, 1000.0]
    # (text columns come as uint8 arrays of the UTF-8 bytes: Spore's tensors have no string dtype)
    assert [bytes(r[2]).decode() for r in rows] == ["x", "none", "quoted, comma"]
    h = tmp_path / "h.csv"  # no column_names: the first line names the columns, all text
    h.write_text("a;b\n1;2\n")
    d2 = ds.CSVDataset([str(h)], field_delim=";", shuffle=False)
    assert d2.get_col_names() == ["a", "b"] and d2.get_dataset_size() == 1
    with pytest.raises(TypeError, match=r"column_defaults\[1\]: expected an int, a float or a str"):
        ds.CSVDataset(str(f), column_defaults=[1, None, "x"])
    with pytest.raises(Exception, match="field_delim must be one character"):
        ds.CSVDataset(str(f), field_delim="::")
    with pytest.raises(OSError, match="nope.csv"):
        list(ds.CSVDataset(str(tmp_path / "nope.csv")).create_tuple_iterator())


def test_image_folder_dataset(tmp_path):
    for cls, n in (("cat", 2), ("dog", 3)):
        (tmp_path / cls).mkdir()
        for i in range(n):
            (tmp_path / cls / f"{i}.jpg").write_bytes(bytes([i, len(cls), 7]))
    d = ds.ImageFolderDataset(str(tmp_path), shuffle=False)
    rows = list(d.create_tuple_iterator(output_numpy=True))
    assert [int(r[1]) for r in rows] == [0, 0, 1, 1, 1]
    np.testing.assert_array_equal(rows[3][0], [1, 3, 7])  # decode=False: the file's bytes
    d2 = ds.ImageFolderDataset(str(tmp_path), class_indexing={"dog": 0}, shuffle=False)
    assert d2.get_dataset_size() == 3


def test_coco_dataset(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"abc")
    (tmp_path / "b.jpg").write_bytes(b"de")
    ann = {"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
           "annotations": [{"id": 10, "image_id": 1, "category_id": 3, "bbox": [1, 2, 3, 4], "iscrowd": 0},
                           {"id": 11, "image_id": 1, "category_id": 5, "bbox": [0, 0, 1, 1], "iscrowd": 1}],
           "categories": [{"id": 3, "name": "x"}, {"id": 5, "name": "y"}]}
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(ann))
    d = ds.CocoDataset(str(tmp_path), str(path), task="Detection", shuffle=False)
    assert d.get_col_names() == ["image", "bbox", "category_id", "iscrowd"]
    rows = list(d.create_dict_iterator(output_numpy=True))
    np.testing.assert_array_equal(rows[0]["bbox"], [[1, 2, 3, 4], [0, 0, 1, 1]])
    np.testing.assert_array_equal(rows[0]["category_id"].reshape(-1), [3, 5])
    assert rows[1]["bbox"].shape == (0, 4)


def test_auto_mixed_precision_and_dynamic_loss_scale():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(4, 3)
            self.bn = nn.BatchNorm1d(3)

        def construct(self, x):
            return self.bn(self.fc(x))

    net = ms.amp.auto_mixed_precision(Net(), "O2", ms.float16)
    x = ms.Tensor(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32))
    assert net._cpp.amp_policy() is not None and "O2" in net._cpp.amp_policy()
    assert net(x).shape == (8, 3)
    mgr = ms.DynamicLossScaleManager(init_loss_scale=2 ** 10, scale_factor=2, scale_window=3)
    y = ms.Tensor(np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32))
    net2 = Net()
    opt = nn.Momentum(net2.trainable_params(), 0.01, 0.9)
    cell = nn.TrainOneStepWithLossScaleCell(
        nn.WithLossCell(net2, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")), opt, scale_sense=mgr)
    scales = []
    for _ in range(4):
        loss, overflow, scale = cell(x, y)
        assert not bool(overflow)
        scales.append(float(scale.asnumpy()))
    assert scales == [1024.0, 1024.0, 1024.0, 2048.0]  # doubled after scale_window clean steps
    assert mgr.get_loss_scale() == 2048.0
