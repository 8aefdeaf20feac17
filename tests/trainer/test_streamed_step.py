"""A training step that streams in its batch (``scheduler.stream_from < 1``) updates the policy exactly as the
step on the whole batch at once, on a real cell."""

from __future__ import annotations

import asyncio

import pytest
import torch

from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.replica.step import StepConfig, train_step
from gyre.scheduler.state import Role
from gyre.trainer.cluster import Cluster, ClusterConfig
from gyre.trajectory import pack_trees
from gyre.trajectory.processor import TrajectoryConfig, process_executions
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

pytestmark = pytest.mark.slow  # a Ray cluster per test: out of the fast tier (-m 'not slow')

LR = 1e-3


def test_a_step_that_streams_in_its_batch_updates_exactly_as_the_whole_batch(ray_session, tiny_model_path):
    """Groups arrive after the step started; each arrival's loss weights assume the batch's 9 executions, of
    which 8 came with calls: the update rescales to 8 and equals the step on the whole batch at once."""
    spec = WorkloadSpec(turns=3, system_tokens=16, task_tokens=16, response_tokens=(4, 10), tool_tokens=(4, 12))
    executions = [synthetic_execution(f"e{i}", spec, seed=i, group=f"g{i // 2}") for i in range(8)]
    for i, execution in enumerate(executions):
        execution.reward = float(i % 3 == 0)
    silent = synthetic_execution("silent", spec, seed=50, group="g3")
    silent.calls = []  # the harness failed before its first call: left out of the loss average
    cfg, count, width = TrajectoryConfig(max_paths=None), 9, 96
    whole = pack_trees(process_executions([*executions, silent], cfg), width)
    reference = load_model(tiny_model_path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=0.0)
    expected = train_step(reference, optimizer, whole, LossConfig(), StepConfig(attention_backend="block"))
    first, *arrivals = [executions[:4], executions[4:6], [*executions[6:], silent]]

    async def later():
        for part in arrivals:
            await asyncio.sleep(0.05)
            yield pack_trees(process_executions(part, cfg, num_executions=count), width)

    async def scenario():
        cluster = Cluster(ClusterConfig(cells=1, cpus_per_cell=0.5,
                                        cell={"lr": LR, "loss": {}, "step": {"attention_backend": "block"}}))
        try:
            await cluster.start_rollout()
            await cluster.switch(cluster.core_id, Role.TRAIN)
            batches = pack_trees(process_executions(first, cfg, num_executions=count), width)
            metrics = await cluster.train_step(batches, max_grad_norm=1.0, more=later(), grad_scale=lambda: count / 8)
            return metrics, cluster.core.state_dict().get()
        finally:
            await cluster.close()

    metrics, weights = asyncio.run(scenario())
    assert metrics["microbatches"] > len(pack_trees(process_executions(first, cfg), width))  # arrivals were trained
    assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-5, abs=1e-7)
    assert metrics["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-5)
    for name, value in reference.state_dict().items():
        assert torch.allclose(weights[name], value, atol=1e-5), name
