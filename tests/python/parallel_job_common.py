"""The part the parallel job scripts share (sharded_dense_job.py, pipeline_job.py): a small
regression trained through Model for 3 epochs and evaluated; the result does not depend on how
many ranks ran it."""
import numpy as np

import spore as ms
from spore import nn


def train_and_eval(net, report=None):
    """Trains net on 64 fixed rows (8 features -> sin of their sum) and returns the eval loss.
    report: a list that receives the auto_parallel strategy report (Model.build runs the search
    ahead of training)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
    model = ms.train.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"loss"})
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)
    if report is not None:
        model.build(train_dataset=data)
        report.extend(model.strategy_report())
    model.train(3, data)
    return model.eval(data)["loss"]
