"""Run by test_parallel.py as 1 process and as `mpirun -n 2`: an MLP as a SequentialCell whose cells
are marked pipeline_stage 0 / 1, trained through Model with pipeline_stages=2 on 2 ranks; prints the
evaluation loss, which must not depend on the number of ranks."""
import spore as ms
from spore import nn
from spore.communication import get_group_size, get_rank, init

from parallel_job_common import train_and_eval  # beside this script

init()
n = get_group_size()
if n > 1:
    ms.set_auto_parallel_context(pipeline_stages=2)
ms.set_seed(3)
net = nn.SequentialCell([nn.Dense(8, 32), nn.ReLU(), nn.Dense(32, 32), nn.ReLU(), nn.Dense(32, 1)])
for i, cell in enumerate(net):
    cell.pipeline_stage = 0 if i < 2 else 1
loss = train_and_eval(net)
if get_rank() == 0:
    print(f"RANKS {n} STAGE {net[0].pipeline_stage} EVAL_LOSS {loss:.9f}", flush=True)
