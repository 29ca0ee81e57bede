"""Linear regression with nn.MSELoss, and its loss curve (MindSpore's linear-fitting tutorial);
the only Spore-specific line is `import spore as ms`.

    python3 examples/python/linear_regression.py --epochs 20 --curve out/linreg_curve.csv
Fits y = 2x + 3 from noisy samples with nn.Dense(1, 1) and Model.train; prints the loss curve and
writes it (CSV, and a PNG when matplotlib is installed).
"""
import argparse
import os

import numpy as np

import spore as ms


def get_data(num, w=2.0, b=3.0, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(num):
        x = rng.uniform(-10.0, 10.0)
        noise = rng.normal(0, 1)
        y = x * w + b + noise
        yield np.array([x]).astype(np.float32), np.array([y]).astype(np.float32)


def create_dataset(num_data, batch_size=16):
    dataset = ms.dataset.GeneratorDataset(list(get_data(num_data)), column_names=["data", "label"])
    return dataset.batch(batch_size)


class CurveRecorder(ms.train.Callback):
    def __init__(self):
        self.epoch_losses = []

    def on_train_epoch_end(self, run_context):
        self.epoch_losses.append(run_context.original_args().epoch_loss)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--samples", type=int, default=1600)
    p.add_argument("--mode", choices=["graph", "pynative"], default="pynative")
    p.add_argument("--curve", default=None, help="write the loss curve (CSV; PNG next to it with matplotlib)")
    args = p.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(2)
    train = create_dataset(args.samples)
    net = ms.nn.Dense(1, 1, ms.common.initializer.Normal(0.02), ms.common.initializer.Normal(0.02))
    opt = ms.nn.Momentum(net.trainable_params(), learning_rate=0.005, momentum=0.9)
    model = ms.train.Model(net, ms.nn.MSELoss(), opt)
    curve = CurveRecorder()
    model.train(args.epochs, train, callbacks=[curve])
    w, b = float(net.weight.asnumpy()[0, 0]), float(net.bias.asnumpy()[0])
    print(f"fitted y = {w:.4f} x + {b:.4f}   (true: y = 2 x + 3)")
    top = max(curve.epoch_losses)
    for e, loss in enumerate(curve.epoch_losses, 1):  # the loss curve, as text
        print(f"epoch {e:3d}  loss {loss:10.4f}  {'#' * max(1, int(50 * loss / top))}")
    if args.curve:
        os.makedirs(os.path.dirname(os.path.abspath(args.curve)), exist_ok=True)
        with open(args.curve, "w") as f:
            f.write("epoch,loss\n")
            f.writelines(f"{e},{loss}\n" for e, loss in enumerate(curve.epoch_losses, 1))
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            plt.plot(range(1, len(curve.epoch_losses) + 1), curve.epoch_losses)
            plt.xlabel("epoch")
            plt.ylabel("MSE loss")
            plt.savefig(os.path.splitext(args.curve)[0] + ".png")
        except ImportError:
            pass
    return w, b, curve.epoch_losses


if __name__ == "__main__":
    main()
