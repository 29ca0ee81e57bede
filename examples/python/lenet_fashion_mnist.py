"""LeNet-5 on Fashion-MNIST with Model.train and LossMonitor, written as a MindSpore script: the
only Spore-specific line is `import spore as ms` (for MindSpore: `import mindspore as ms`).

    python3 examples/python/lenet_fashion_mnist.py --epochs 1 --mode graph
It trains the model zoo's LeNet-5 (as `spore train lenet` does: same data pipeline, initialisation
and optimizer, so with the same seed both print the same losses) and evaluates test accuracy.
"""
import argparse
import json

import spore as ms

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training-set statistics of x / 255


class LeNet5(ms.nn.Cell):
    """MindSpore's model-zoo LeNet-5; conv1 pads by 2 so 28x28 images give the 32x32 geometry."""

    def __init__(self, num_class=10, num_channel=1):
        super().__init__()
        self.conv1 = ms.nn.Conv2d(num_channel, 6, 5, pad_mode="pad", padding=2)
        self.conv2 = ms.nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.fc1 = ms.nn.Dense(16 * 5 * 5, 120, weight_init=ms.common.initializer.Normal(0.02))
        self.fc2 = ms.nn.Dense(120, 84, weight_init=ms.common.initializer.Normal(0.02))
        self.fc3 = ms.nn.Dense(84, num_class, weight_init=ms.common.initializer.Normal(0.02))
        self.relu = ms.nn.ReLU()
        self.max_pool2d = ms.nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = ms.nn.Flatten()

    def construct(self, x):
        x = self.max_pool2d(self.relu(self.conv1(x)))
        x = self.max_pool2d(self.relu(self.conv2(x)))
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def create_dataset(data_path, usage="train", batch_size=64, num_samples=None, shuffle=True):
    data = ms.dataset.MnistDataset(data_path, usage=usage, num_samples=num_samples, shuffle=False)
    if shuffle:
        data = data.shuffle(data.get_dataset_size())
    # Whole batches are transformed (one pass per batch, on the consumer's thread: cheaper on 2 cores
    # than per-image transforms on worker threads), as `spore train` does.
    data = data.batch(batch_size)
    transforms = [ms.dataset.vision.Rescale(1.0 / (255.0 * STD), -MEAN / STD), ms.dataset.vision.HWC2CHW()]
    return data.map(operations=transforms, input_columns="image", num_parallel_workers=1)


class EpochLosses(ms.train.Callback):
    """Records each epoch's mean loss."""

    def __init__(self):
        self.steps, self.epochs, self.seconds = [], [], []

    def on_train_epoch_end(self, run_context):
        cb = run_context.original_args()
        self.epochs.append(cb.epoch_loss)
        self.seconds.append(cb.epoch_elapsed)


class StepLosses(EpochLosses):
    """Also records every step's loss."""

    def on_train_step_end(self, run_context):
        self.steps.append(float(run_context.original_args().net_outputs.asnumpy()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--mode", choices=["graph", "pynative"], default="graph")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="use only the first N training images")
    p.add_argument("--eval-limit", type=int, default=None)
    p.add_argument("--print-every", type=int, default=100)
    p.add_argument("--record-steps", action="store_true", help="record every step's loss (a Python callback)")
    p.add_argument("--losses-json", default=None, help="write the step and epoch losses here")
    p.add_argument("--ckpt", default=None, help="save the trained network here (ms.save_checkpoint)")
    args = p.parse_args(argv)

    ms.set_seed(args.seed)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.dataset.config.set_prefetch_size(0)  # as `spore train`: batches on demand, on 2 cores
    train = create_dataset(args.data, "train", args.batch_size, args.limit)
    test = create_dataset(args.data, "test", 256, args.eval_limit, shuffle=False)
    net = LeNet5()
    loss = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = ms.nn.Momentum(net.trainable_params(), learning_rate=args.lr, momentum=args.momentum)
    model = ms.train.Model(net, loss, opt, metrics={"accuracy"})
    record = StepLosses() if args.record_steps else EpochLosses()
    model.train(args.epochs, train, callbacks=[ms.train.LossMonitor(args.print_every), ms.train.TimeMonitor(),
                                                record])
    acc = model.eval(test)["accuracy"]
    print(f"test accuracy: {acc:.4f}")
    if args.ckpt:
        ms.save_checkpoint(net, args.ckpt)
    if args.losses_json:
        with open(args.losses_json, "w") as f:
            json.dump({"steps": record.steps, "epochs": record.epochs, "epoch_seconds": record.seconds,
                       "accuracy": acc}, f)
    return net, record, acc


if __name__ == "__main__":
    main()
