"""The toy task several Python tests train on: three Gaussian blobs in 2-D and a small MLP."""
import numpy as np

from spore import nn


def blobs(n=256, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int32)
    centers = np.array([[2, 0], [-2, 1], [0, -2]], np.float32)
    x = (centers[y] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32)
    return x, y


class Classifier(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(2, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.act(self.fc1(x)))
