"""A custom training loop with ops.value_and_grad and an optimizer (MindSpore's functional style);
the only Spore-specific line is `import spore as ms`.

    python3 examples/python/custom_training_loop.py --epochs 1 --mode pynative
Trains an MLP on Fashion-MNIST; in GRAPH_MODE the step (forward, gradients, update) is one
compiled graph through @ms.jit.
"""
import argparse

import spore as ms


class MLP(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = ms.nn.Flatten()
        self.dense_relu_sequential = ms.nn.SequentialCell(
            ms.nn.Dense(28 * 28, 256), ms.nn.ReLU(), ms.nn.Dense(256, 128), ms.nn.ReLU(), ms.nn.Dense(128, 10))

    def construct(self, x):
        return self.dense_relu_sequential(self.flatten(x))


def datapipe(path, usage, batch_size, num_samples=None):
    data = ms.dataset.MnistDataset(path, usage=usage, num_samples=num_samples)
    image_transforms = [ms.dataset.vision.Rescale(1.0 / 255.0, 0), ms.dataset.vision.Normalize(mean=(0.1307,),
                        std=(0.3081,)), ms.dataset.vision.HWC2CHW()]
    data = data.map(image_transforms, "image")
    data = data.map(ms.dataset.transforms.TypeCast(ms.int32), "label")
    return data.batch(batch_size)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--mode", choices=["graph", "pynative"], default="pynative")
    args = p.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(0)
    train_dataset = datapipe(args.data, "train", 64, args.limit)
    test_dataset = datapipe(args.data, "test", 256, args.limit)
    model = MLP()
    loss_fn = ms.nn.CrossEntropyLoss()
    optimizer = ms.nn.SGD(model.trainable_params(), args.lr)

    def forward_fn(data, label):
        logits = model(data)
        loss = loss_fn(logits, label)
        return loss, logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    @ms.jit
    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        optimizer(grads)
        return loss

    def train_loop(model, dataset):
        size = dataset.get_dataset_size()
        model.set_train()
        losses = []
        for batch, (data, label) in enumerate(dataset.create_tuple_iterator()):
            loss = train_step(data, label)
            losses.append(loss.asnumpy().item())
            if batch % 100 == 0:
                print(f"loss: {losses[-1]:>7f}  [{batch:>3d}/{size:>3d}]")
        return losses

    def test_loop(model, dataset, loss_fn):
        num_batches = dataset.get_dataset_size()
        model.set_train(False)
        total, test_loss, correct = 0, 0, 0
        for data, label in dataset.create_tuple_iterator():
            pred = model(data)
            total += len(data)
            test_loss += loss_fn(pred, label).asnumpy()
            correct += (pred.argmax(1) == label).asnumpy().sum()
        test_loss /= num_batches
        correct /= total
        print(f"Test: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")
        return correct

    all_losses, acc = [], 0.0
    for t in range(args.epochs):
        print(f"Epoch {t + 1}\n-------------------------------")
        all_losses += train_loop(model, train_dataset)
        acc = test_loop(model, test_dataset, loss_fn)
    print("Done!")
    return all_losses, acc


if __name__ == "__main__":
    main()
