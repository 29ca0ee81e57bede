"""GeneratorDataset over a Python class that yields (image, label), with prefetch_size=32, feeding
Model.train; the only Spore-specific line is `import spore as ms`.

    python3 examples/python/generator_dataset.py --samples 2048
The source makes noisy images of horizontal / vertical / diagonal stripes on the fly (numpy); a
small CNN learns to tell them apart.
"""
import argparse

import numpy as np

import spore as ms


class StripesSource:
    """Random-access source: sample i is a (1, 16, 16) float32 image and its int32 class."""

    def __init__(self, num_samples, seed=0):
        self.num_samples, self.seed = num_samples, seed

    def __getitem__(self, index):
        rng = np.random.default_rng(self.seed * 1000003 + index)
        label = index % 3
        img = rng.normal(0, 0.3, (16, 16)).astype(np.float32)
        phase = rng.integers(0, 4)
        if label == 0:
            img[phase::4, :] += 1.0
        elif label == 1:
            img[:, phase::4] += 1.0
        else:
            for k in range(16):
                img[k, (k + phase) % 16] += 1.5
        return img[None], np.array(label, np.int32)

    def __len__(self):
        return self.num_samples


class SmallCNN(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = ms.nn.Conv2d(1, 8, 3, pad_mode="same", has_bias=True)
        self.relu = ms.nn.ReLU()
        self.pool = ms.nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = ms.nn.Flatten()
        self.fc = ms.nn.Dense(8 * 8 * 8, 3)

    def construct(self, x):
        return self.fc(self.flatten(self.pool(self.relu(self.conv(x)))))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--mode", choices=["graph", "pynative"], default="graph")
    args = p.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(1)
    train = ms.dataset.GeneratorDataset(StripesSource(args.samples), column_names=["image", "label"], shuffle=True,
                                        num_parallel_workers=2, prefetch_size=32).batch(32, drop_remainder=True)
    test = ms.dataset.GeneratorDataset(StripesSource(512, seed=7), column_names=["image", "label"],
                                       shuffle=False).batch(128)
    net = SmallCNN()
    loss = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = ms.nn.Adam(net.trainable_params(), learning_rate=3e-3)
    model = ms.train.Model(net, loss, opt, metrics={"accuracy"})
    model.train(args.epochs, train, callbacks=[ms.train.LossMonitor(50), ms.train.TimeMonitor()])
    acc = model.eval(test)["accuracy"]
    print(f"test accuracy: {acc:.4f}")
    return acc


if __name__ == "__main__":
    main()
