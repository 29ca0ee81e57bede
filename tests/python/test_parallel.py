"""The auto-parallel context from Python: gradient accumulation in Model (one process), the
context's checks, and mindspore.communication in a job of one."""
import numpy as np
import pytest

import spore as ms
from spore import nn


class Tiny(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 1, weight_init="zeros")

    def construct(self, x):
        return self.fc(x)


def _train(accum, batch):
    ms.set_seed(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [0.3]], np.float32)).astype(np.float32)
    ms.set_auto_parallel_context(gradient_accumulation_steps=accum)
    try:
        net = Tiny()
        opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
        model = ms.train.Model(net, nn.MSELoss(), opt)
        data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(batch)
        model.train(2, data)
        return net.fc.weight.asnumpy().copy(), opt.global_step if hasattr(opt, "global_step") else None
    finally:
        ms.reset_auto_parallel_context()


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_gradient_accumulation_in_model_equals_the_whole_batch(mode):
    ms.set_context(mode=mode)
    try:
        whole, _ = _train(1, 16)
        accumulated, _ = _train(4, 4)  # 4 micro-batches of 4 = one update on 16 rows
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(accumulated, whole, rtol=1e-5, atol=1e-6)
    assert np.abs(whole).sum() > 0.1  # it trained


def test_auto_parallel_context_checks():
    with pytest.raises(NotImplementedError, match="strategy_ckpt_load_file"):
        ms.set_auto_parallel_context(strategy_ckpt_load_file="x.ckpt")
    with pytest.raises(ValueError, match="pipeline_stages must be >= 1"):
        ms.set_auto_parallel_context(pipeline_stages=0)
    ms.reset_auto_parallel_context()
    with pytest.raises(ValueError, match="device_num=8"):
        ms.set_auto_parallel_context(device_num=8)
    with pytest.raises(ValueError, match="gradient_accumulation_steps must be >= 1"):
        ms.set_auto_parallel_context(gradient_accumulation_steps=0)
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, enable_parallel_optimizer=True)
    assert ms.get_auto_parallel_context("enable_parallel_optimizer") is True
    assert ms.get_auto_parallel_context("device_num") == 1
    ms.reset_auto_parallel_context()
    assert ms.get_auto_parallel_context("parallel_mode") == ms.ParallelMode.STAND_ALONE


def test_communication_in_a_job_of_one():
    from spore.communication import get_group_size, get_rank, init
    init()
    assert (get_rank(), get_group_size()) == (0, 1)


def _one_and_two_ranks(script_name, pattern, extra_env=None):
    """Runs tests/python/<script_name> as one process and as 2 MPI ranks (with extra_env set); the
    regex matches of its result line (or a skip when mpirun is missing)."""
    import os
    import re
    import shutil
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), script_name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI"))}
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra_env or {})
    one = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed")
    two = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, script],
                         env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stdout + two.stderr
    a, b = re.search(pattern, one.stdout), re.search(pattern, two.stdout)
    assert a and b, one.stdout + two.stdout
    return a, b


def test_semi_auto_parallel_dense_shard_matches_one_process():
    """Dense.shard under semi_auto_parallel, 2 MPI ranks, through Model: the same evaluation loss as
    one process (and each rank holds half of fc1's weight)."""
    a, b = _one_and_two_ranks("sharded_dense_job.py", r"RANKS (\d+) WEIGHT_ROWS (\d+) EVAL_LOSS ([0-9.eE+-]+)")
    assert (a.group(1), a.group(2)) == ("1", "32") and (b.group(1), b.group(2)) == ("2", "16")
    np.testing.assert_allclose(float(b.group(3)), float(a.group(3)), rtol=1e-5)


def test_semi_auto_parallel_with_parallel_optimizer_matches_one_process():
    """semi_auto_parallel with enable_parallel_optimizer (ZeRO-1 over each piece's replicas), 2 MPI
    ranks, through Model: the same evaluation loss as one process."""
    a, b = _one_and_two_ranks("sharded_dense_job.py", r"RANKS (\d+) WEIGHT_ROWS (\d+) EVAL_LOSS ([0-9.eE+-]+)",
                              {"SPORE_JOB_ZERO": "1"})
    assert (b.group(1), b.group(2)) == ("2", "16")
    np.testing.assert_allclose(float(b.group(3)), float(a.group(3)), rtol=1e-5)


def test_auto_parallel_search_matches_one_process():
    """auto_parallel with search_mode="sharding_propagation", 2 MPI ranks, through Model: fc1 cut by
    hand, fc2's strategy searched; the same evaluation loss as one process."""
    a, b = _one_and_two_ranks("sharded_dense_job.py", r"RANKS (\d+) WEIGHT_ROWS (\d+) EVAL_LOSS ([0-9.eE+-]+)",
                              {"SPORE_JOB_AUTO": "1"})
    assert (b.group(1), b.group(2)) == ("2", "16")
    plan = b.string[:b.start()]  # Model.build's report: fc1 as given, fc2 chosen by the search
    assert "PLAN fc1  ((1, 1), (2, 1))  user" in plan and "PLAN fc2 " in plan and "chosen" in plan, plan
    np.testing.assert_allclose(float(b.group(3)), float(a.group(3)), rtol=1e-5)


def test_pipeline_stages_in_model_match_one_process():
    """set_auto_parallel_context(pipeline_stages=2) and cell.pipeline_stage, 2 MPI ranks, through
    Model: the same evaluation loss as one process."""
    a, b = _one_and_two_ranks("pipeline_job.py", r"RANKS (\d+) STAGE (\d+) EVAL_LOSS ([0-9.eE+-]+)")
    assert (a.group(1), b.group(1), b.group(2)) == ("1", "2", "0")
    np.testing.assert_allclose(float(b.group(3)), float(a.group(3)), rtol=1e-5)


def test_sync_batch_norm_data_parallel_matches_one_process():
    """nn.SyncBatchNorm under data_parallel, 2 MPI ranks with half of each batch, through Model:
    the same evaluation loss as one process on the whole batches."""
    a, b = _one_and_two_ranks("sync_bn_job.py", r"RANKS (\d+) EVAL_LOSS ([0-9.eE+-]+)")
    assert (a.group(1), b.group(1)) == ("1", "2")
    np.testing.assert_allclose(float(b.group(2)), float(a.group(2)), rtol=1e-5)


def test_sync_batch_norm_in_one_process_is_batch_norm_and_checks_its_groups():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((6, 3, 4, 4)) * 2 + 1).astype(np.float32)
    sync, bn = nn.SyncBatchNorm(3, process_groups=[[0]]), nn.BatchNorm2d(3)
    np.testing.assert_allclose(sync(ms.Tensor(x)).asnumpy(), bn(ms.Tensor(x)).asnumpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sync.moving_variance.asnumpy(), bn.moving_variance.asnumpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="names rank 1, and the job has ranks 0 .. 0"):
        nn.SyncBatchNorm(3, process_groups=[[0, 1]])
    with pytest.raises(ValueError, match="lists rank 0 twice"):
        nn.SyncBatchNorm(3, process_groups=[[0], [0]])
    with pytest.raises(ValueError, match="leaves out rank 0"):
        nn.SyncBatchNorm(3, process_groups=[])
