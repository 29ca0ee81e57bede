"""MindSpore's side of the .ckpt cross-check (tests/io/mindspore_crosscheck.py runs it with a Python
that has the `mindspore` package). The network is the model zoo's LeNet-5 (official/cv/lenet) with
conv1 padded by 2 for 28x28 Fashion-MNIST images, as Spore's models/lenet.h is.

    ms_lenet.py eval CKPT X.npy LOGITS.npy N   load CKPT, write the logits of X, print the accuracy
                                                 on the first N Fashion-MNIST test images
    ms_lenet.py resave CKPT OUT.ckpt           load CKPT into the net and save it with MindSpore
"""
import gzip
import sys

import numpy as np
import mindspore as ms
from mindspore import nn

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # Spore's normalisation (tools/spore/jobs.cpp)


class LeNet5(nn.Cell):
    def __init__(self, num_class=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="pad", padding=2, has_bias=False)
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=False)
        self.fc1 = nn.Dense(16 * 5 * 5, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, num_class)
        self.relu = nn.ReLU()
        self.max_pool2d = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()

    def construct(self, x):
        x = self.max_pool2d(self.relu(self.conv1(x)))
        x = self.max_pool2d(self.relu(self.conv2(x)))
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def test_set(n):
    with gzip.open(f"{DATA}/t10k-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n]
    with gzip.open(f"{DATA}/t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    x = ((images.astype(np.float32) / 255.0 - MEAN) / STD).astype(np.float32)
    return x, labels


def load(path):
    net = LeNet5()
    params = ms.load_checkpoint(path)
    not_loaded, _ = ms.load_param_into_net(net, params)
    assert not not_loaded, f"MindSpore did not load {not_loaded} from {path}"
    net.set_train(False)
    return net


def main():
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    cmd = sys.argv[1]
    net = load(sys.argv[2])
    if cmd == "eval":
        x = np.load(sys.argv[3])
        np.save(sys.argv[4], net(ms.Tensor(x)).asnumpy())
        tx, ty = test_set(int(sys.argv[5]))
        logits = np.concatenate([net(ms.Tensor(tx[i:i + 250])).asnumpy() for i in range(0, len(tx), 250)])
        print(f"accuracy {float((logits.argmax(1) == ty).mean()):.4f}")
    elif cmd == "resave":
        ms.save_checkpoint(net, sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
