"""Run by test_parallel.py as 1 process and as `mpirun -n 2`: an MLP with nn.SyncBatchNorm trained
data parallel through Model, each rank on its half of every batch of 16; prints the evaluation loss
(moving statistics, the whole data on every rank), which must not depend on the number of ranks."""
import numpy as np

import spore as ms
from spore import nn
from spore.communication import get_group_size, get_rank, init

init()
n, me = get_group_size(), get_rank()
if n > 1:
    ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True)
ms.set_seed(3)
net = nn.SequentialCell([nn.Dense(8, 16), nn.SyncBatchNorm(16), nn.ReLU(), nn.Dense(16, 1)])
rng = np.random.default_rng(0)
x = (rng.standard_normal((64, 8)) * 2 + 1).astype(np.float32)
y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
# This rank's rows of each batch of 16: the ranks' batches together are one process's batch.
per = 16 // n
mine = np.concatenate([np.arange(b + me * per, b + (me + 1) * per) for b in range(0, 64, 16)])
model = ms.train.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"loss"})
model.train(3, ms.dataset.NumpySlicesDataset((x[mine], y[mine]), ["x", "y"], shuffle=False).batch(per))
loss = model.eval(ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16))["loss"]
if me == 0:
    print(f"RANKS {n} EVAL_LOSS {loss:.9f}", flush=True)
