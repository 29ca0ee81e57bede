"""Run by test_parallel.py as 1 process and as `mpirun -n 2`: an MLP as a SequentialCell whose cells
are marked pipeline_stage 0 / 1, trained through Model with pipeline_stages=2 on 2 ranks; prints the
evaluation loss, which must not depend on the number of ranks."""
import numpy as np

import spore as ms
from spore import nn
from spore.communication import get_group_size, get_rank, init

init()
n = get_group_size()
if n > 1:
    ms.set_auto_parallel_context(pipeline_stages=2)
ms.set_seed(3)
net = nn.SequentialCell([nn.Dense(8, 32), nn.ReLU(), nn.Dense(32, 32), nn.ReLU(), nn.Dense(32, 1)])
for i, cell in enumerate(net):
    cell.pipeline_stage = 0 if i < 2 else 1
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 8)).astype(np.float32)
y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
model = ms.train.Model(net, nn.MSELoss(), nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"loss"})
data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)
model.train(3, data)
res = model.eval(data)
if get_rank() == 0:
    print(f"RANKS {n} STAGE {net[0].pipeline_stage} EVAL_LOSS {res['loss']:.9f}", flush=True)
