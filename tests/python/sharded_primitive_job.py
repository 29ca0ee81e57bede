"""Run by test_mindspore_surface.py as 1 process and as `mpirun -n 2`: an MLP written with
primitives (ops.MatMul on Parameters) whose matmuls carry shard() strategies under
semi_auto_parallel: the first cuts its weight's columns (the output's features), the second cuts the
contraction (partial sums all-reduced by the engine). Trained through Model in Graph mode; prints
the evaluation loss, which must not depend on the number of ranks, and how many redistributions
the engine logged (0 in one process)."""
import numpy as np

import spore as ms
from spore import nn, ops
from spore.communication import get_group_size, get_rank, init

from parallel_job_common import train_and_eval  # beside this script

init()
n = get_group_size()
ms.set_context(mode=ms.GRAPH_MODE)
if n > 1:
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n,
                                 dataset_strategy=((1, 1), (1, 1)), full_batch=True)


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(7)
        self.w1 = ms.Parameter(ms.Tensor((0.3 * rng.standard_normal((8, 32))).astype(np.float32)), name="w1")
        self.w2 = ms.Parameter(ms.Tensor((0.3 * rng.standard_normal((32, 1))).astype(np.float32)), name="w2")
        self.mm1 = ops.MatMul().shard(((1, 1), (1, n)))  # column parallel
        self.mm2 = ops.MatMul().shard(((1, n), (n, 1)))  # row parallel: the contraction is cut
        self.relu = ops.ReLU().shard(((1, n),))

    def construct(self, x):
        return self.mm2(self.relu(self.mm1(x, self.w1)), self.w2)


ms.set_seed(3)
net = MLP()
loss = train_and_eval(net)
if get_rank() == 0:
    log = ms._C.shard_log()
    reduced = sum("all_reduce" in line or "reduce_scatter" in line for line in log)
    print(f"RANKS {n} EVAL_LOSS {loss:.9f} MOVES {len(log)} REDUCES {reduced}", flush=True)
