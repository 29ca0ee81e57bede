"""Mixed precision with amp.build_train_network(..., level="O2",
loss_scale_manager=FixedLossScaleManager()); the only Spore-specific line is `import spore as ms`.

    python3 examples/python/amp_o2.py --steps 200
O2 runs the network in float16 except BatchNorm, casts the output to float32 before the loss,
keeps float32 master weights, and scales the loss by 128 (overflowed steps are skipped).
"""
import argparse

import numpy as np

import spore as ms


class Net(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = ms.nn.Conv2d(1, 8, 3, pad_mode="same")
        self.bn = ms.nn.BatchNorm2d(8)
        self.relu = ms.nn.ReLU()
        self.pool = ms.nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = ms.nn.Flatten()
        self.fc = ms.nn.Dense(8 * 14 * 14, 10)

    def construct(self, x):
        return self.fc(self.flatten(self.pool(self.relu(self.bn(self.conv(x))))))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--mode", choices=["graph", "pynative"], default="graph")
    args = p.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(3)
    data = ms.dataset.MnistDataset(args.data, usage="train", num_samples=args.steps * 32)
    data = data.map([ms.dataset.vision.Rescale(1 / 255.0, 0), ms.dataset.vision.HWC2CHW()], "image").batch(32)
    net = Net()
    loss_fn = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = ms.nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    train_net = ms.amp.build_train_network(net, opt, loss_fn, level="O2",
                                           loss_scale_manager=ms.FixedLossScaleManager())
    losses = []
    for step, (images, labels) in enumerate(data.create_tuple_iterator()):
        loss, overflow, scale = train_net(images, labels)
        losses.append(float(loss.asnumpy()))
        if step % 50 == 0:
            print(f"step {step}: loss {losses[-1]:.4f}, overflow {bool(overflow)}, loss scale {float(scale.asnumpy())}")
    print(f"mean loss, first 20 steps {np.mean(losses[:20]):.4f}, last 20 steps {np.mean(losses[-20:]):.4f}")
    return losses


if __name__ == "__main__":
    main()
