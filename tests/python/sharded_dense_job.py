"""Run by test_parallel.py as 1 process and as `mpirun -n 2`: an MLP whose two Dense layers are cut
Megatron-style (fc1 column parallel, fc2 row parallel) under semi_auto_parallel, trained through
Model in Graph mode; prints the evaluation loss, which must not depend on the number of ranks.
With SPORE_JOB_ZERO=1, enable_parallel_optimizer too (ZeRO-1 over each piece's replicas). With
SPORE_JOB_AUTO=1, auto_parallel (search_mode "sharding_propagation"): only fc1 is cut by hand and
the search chooses fc2's strategy."""
import os

import spore as ms
from spore import nn
from spore.communication import get_group_size, get_rank, init

from parallel_job_common import train_and_eval  # beside this script

init()
n = get_group_size()
ms.set_context(mode=ms.GRAPH_MODE)
AUTO = os.environ.get("SPORE_JOB_AUTO") == "1"
if n > 1 and AUTO:
    ms.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation",
                                 device_num=n, dataset_strategy=((1, 1), (1, 1)), full_batch=True)
elif n > 1:
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", device_num=n,
                                 dataset_strategy=((1, 1), (1, 1)), full_batch=True,
                                 enable_parallel_optimizer=os.environ.get("SPORE_JOB_ZERO") == "1")


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(32, 1)
        self.fc1.shard(((1, 1), (n, 1)))  # no-ops outside semi_auto_parallel, as in MindSpore
        if not AUTO:
            self.fc2.shard(((1, n), (1, n)))

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


ms.set_seed(3)
net = MLP()
report = [] if AUTO else None
loss = train_and_eval(net, report)
if get_rank() == 0:
    for line in report or []:
        print("PLAN", line.strip(), flush=True)
    print(f"RANKS {n} WEIGHT_ROWS {net.fc1.weight.shape[0]} EVAL_LOSS {loss:.9f}", flush=True)
