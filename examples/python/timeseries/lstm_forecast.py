"""One-step-ahead forecasting of a time series with an LSTM (MindSpore's API; the only Spore-specific
line is `import spore as ms`).

    python3 examples/python/timeseries/lstm_forecast.py --epochs 20 --out out/timeseries

The series is generated: a slow sine, a faster seasonal sine and Gaussian noise. Windows of the
last `--window` values predict the next one; the first 80% of the series trains, the rest tests.
nn.LSTM (batch_first) feeds its last hidden state to nn.Dense; Model trains it with nn.MSELoss
and evaluates MSE / MAE on the test windows, next to the naive forecast "the next value is the
last one". With --out it writes loss.csv (per epoch) and forecast.csv (test truth, forecast and
naive forecast), and PNGs of both when matplotlib is installed. --optimizer lamb or adagrad
(which wants a larger rate, --lr 0.1) trains with nn.Lamb / nn.Adagrad instead of nn.Adam.
"""
import argparse
import os

import numpy as np

import spore as ms


def make_series(points, noise=0.1, seed=0):
    """y(t) = sin(2 pi t / 40) + 0.5 sin(2 pi t / 10) + N(0, noise^2)."""
    rng = np.random.default_rng(seed)
    t = np.arange(points, dtype=np.float64)
    y = np.sin(2 * np.pi * t / 40) + 0.5 * np.sin(2 * np.pi * t / 10) + rng.normal(0, noise, points)
    return y.astype(np.float32)


def make_windows(series, window):
    """(windows (M, window, 1), next values (M, 1)): each window of `window` values and the one after."""
    m = len(series) - window
    x = np.stack([series[i:i + window] for i in range(m)])[:, :, None]
    y = series[window:][:, None]
    return x.astype(np.float32), y.astype(np.float32)


class WindowSource:
    """A random-access source for GeneratorDataset: (window, next value) pairs."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


class Forecaster(ms.nn.Cell):
    def __init__(self, hidden, num_layers):
        super().__init__()
        self.lstm = ms.nn.LSTM(1, hidden, num_layers=num_layers, batch_first=True)
        self.head = ms.nn.Dense(hidden, 1)

    def construct(self, x):  # x (N, window, 1)
        output, (h_n, c_n) = self.lstm(x)
        return self.head(h_n[-1])  # the last layer's final state -> (N, 1)


class CurveRecorder(ms.train.Callback):
    def __init__(self):
        self.epoch_losses = []

    def on_train_epoch_end(self, run_context):
        self.epoch_losses.append(run_context.original_args().epoch_loss)


def make_optimizer(name, params, lr):
    if name == "adam":
        return ms.nn.Adam(params, learning_rate=lr)
    if name == "lamb":
        return ms.nn.Lamb(params, learning_rate=lr)
    return ms.nn.Adagrad(params, learning_rate=lr)


def write_outputs(out, losses, truth, forecast, naive):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "loss.csv"), "w") as f:
        f.write("epoch,loss\n")
        f.writelines(f"{e},{loss}\n" for e, loss in enumerate(losses, 1))
    with open(os.path.join(out, "forecast.csv"), "w") as f:
        f.write("step,truth,forecast,naive\n")
        f.writelines(f"{i},{a},{b},{c}\n" for i, (a, b, c) in enumerate(zip(truth, forecast, naive)))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    plt.figure()
    plt.plot(range(1, len(losses) + 1), losses)
    plt.xlabel("epoch")
    plt.ylabel("MSE loss")
    plt.savefig(os.path.join(out, "loss.png"))
    plt.figure(figsize=(10, 4))
    plt.plot(truth, label="truth")
    plt.plot(forecast, label="LSTM forecast")
    plt.plot(naive, label="last value", alpha=0.5)
    plt.legend()
    plt.xlabel("test step")
    plt.savefig(os.path.join(out, "forecast.png"))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--points", type=int, default=1200, help="length of the generated series")
    p.add_argument("--window", type=int, default=24)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--optimizer", choices=["adam", "lamb", "adagrad"], default="adam")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--mode", choices=["graph", "pynative"], default="pynative")
    p.add_argument("--out", default=None, help="folder for loss.csv / forecast.csv (and PNGs with matplotlib)")
    args = p.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(3)

    series = make_series(args.points)
    split = int(0.8 * len(series))
    x_train, y_train = make_windows(series[:split], args.window)
    x_test, y_test = make_windows(series[split - args.window:], args.window)  # test targets: the last 20%
    train = ms.dataset.GeneratorDataset(WindowSource(x_train, y_train), column_names=["window", "target"],
                                        shuffle=True).batch(args.batch_size)
    test = ms.dataset.GeneratorDataset(WindowSource(x_test, y_test), column_names=["window", "target"],
                                       shuffle=False).batch(args.batch_size)

    net = Forecaster(args.hidden, args.layers)
    opt = make_optimizer(args.optimizer, net.trainable_params(), args.lr)
    model = ms.train.Model(net, ms.nn.MSELoss(), opt, metrics={"mse": ms.nn.MSE(), "mae": ms.nn.MAE()})
    curve = CurveRecorder()
    model.train(args.epochs, train, callbacks=[curve])
    metrics = model.eval(test)

    forecast = model.predict(ms.Tensor(x_test)).asnumpy()[:, 0]
    truth = y_test[:, 0]
    naive = x_test[:, -1, 0]  # the last value of each window
    result = {"mse": float(metrics["mse"]), "mae": float(metrics["mae"]),
              "naive_mse": float(np.mean((naive - truth) ** 2)), "naive_mae": float(np.mean(np.abs(naive - truth))),
              "epoch_losses": curve.epoch_losses, "forecast": forecast, "truth": truth}
    top = max(curve.epoch_losses)
    for e, loss in enumerate(curve.epoch_losses, 1):
        print(f"epoch {e:3d}  loss {loss:8.5f}  {'#' * max(1, int(50 * loss / top))}")
    print(f"test ({len(truth)} steps): LSTM MSE {result['mse']:.5f} MAE {result['mae']:.5f} | "
          f"last-value MSE {result['naive_mse']:.5f} MAE {result['naive_mae']:.5f}")
    if args.out:
        write_outputs(args.out, curve.epoch_losses, truth, forecast, naive)
    return result


if __name__ == "__main__":
    main()
