"""Cells on Ray: role switches, streaming training with a satellite joining mid-step, weight sync; with cells
of one rank and of two ranks (an FSDP2-sharded replica per cell, weights moving shard to shard)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.rollout.base import SamplingParams
from gyre.scheduler.state import Role
from gyre.trainer.cluster import Cluster, ClusterConfig
from gyre.replica.step import StepConfig, train_step
from gyre.trajectory import pack_trees
from gyre.trajectory.processor import TrajectoryConfig, process_executions
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

pytestmark = pytest.mark.slow  # Ray cells of one and two ranks (minutes): out of the fast tier (-m 'not slow')

LR = 1e-3


def step_batches(big_turns: int = 16, big_subagents: int = 4, chunk_tokens: int = 8192):
    """A long first micro-batch (one big tree, longer than a micro-batch: trained in chunks by the replica
    that pulls it) then small ones: the satellite's join lands while the core is busy with the first, so it
    is really mid-step, and there is work left for it to pull. The default tree (~11K tokens, two 8K chunks)
    trains for seconds against a join's ~0.2 s; a test that needs no join to land mid-step asks for a shorter
    one (test_sharding.py)."""
    spec = WorkloadSpec(turns=3, system_tokens=16, task_tokens=16, response_tokens=(4, 10), tool_tokens=(4, 12))
    big = WorkloadSpec(turns=big_turns, response_tokens=(40, 80), tool_tokens=(200, 400), subagents=big_subagents)
    executions = [synthetic_execution(f"e{i}", spec, seed=i, group=f"g{i % 3}") for i in range(8)]
    executions.append(synthetic_execution("big", big, seed=99, group="g0"))
    for i, execution in enumerate(executions):
        execution.reward = float(i % 2)
    trees = process_executions(executions, TrajectoryConfig(max_paths=None))
    large = [t for t in trees if t.execution_id == "big"]
    small = [t for t in trees if t.execution_id != "big"]
    chunked = pack_trees(large, chunk_tokens)
    assert len(chunked) == 1 and chunked[0].chunk_tokens == chunk_tokens < chunked[0].num_tokens
    return chunked + pack_trees(small, max_tokens=max(t.num_tokens for t in small))


@pytest.fixture(scope="module", params=[1, 2], ids=["1-rank-cells", "2-rank-cells"])
def cluster(ray_session, request):
    # 50 KiB buckets: the tiny model's weights move in dozens of them (its embedding, 512 KiB, alone)
    cfg = ClusterConfig(cells=2, cpus_per_cell=0.5, ranks_per_cell=request.param, weight_sync_bucket_mb=0.05,
                        cell={"lr": LR, "loss": {}, "step": {"attention_backend": "block"}})

    async def build():
        return Cluster(cfg)

    loop = asyncio.new_event_loop()
    cluster = loop.run_until_complete(build())
    cluster.loop = loop
    yield cluster
    loop.run_until_complete(cluster.close())
    loop.close()


def test_streaming_step_with_a_satellite_joining_mid_step_equals_one_trainer(cluster, tiny_model_path):
    batches = step_batches()
    assert len(batches) >= 6 and batches[0].num_tokens > 10 * batches[1].num_tokens
    reference = load_model(tiny_model_path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=0.0)
    expected = train_step(reference, optimizer, batches, LossConfig(), StepConfig(attention_backend="block"))

    async def scenario():
        await cluster.start_rollout()
        await cluster.switch(cluster.core_id, Role.TRAIN)
        task = asyncio.create_task(cluster.train_step(batches, max_grad_norm=1.0))
        while cluster.step is None or not cluster.step.inflight:
            await asyncio.sleep(0.01)  # the core is training the long first micro-batch
        await cluster.switch("cell1", Role.TRAIN)
        metrics = await task
        return metrics

    metrics = cluster.loop.run_until_complete(scenario())
    assert metrics["version"] == 1
    assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-5, abs=1e-7)
    assert metrics["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-5)
    assert metrics["microbatches/cell0"] >= 1 and metrics["microbatches/cell1"] >= 1
    assert metrics["microbatches/cell0"] + metrics["microbatches/cell1"] == len(batches)
    core_weights = cluster.core.state_dict().get()
    for name, value in reference.state_dict().items():
        assert torch.allclose(core_weights[name], value, atol=1e-5), name
    # the satellite (still training) received the new weights, and the switch times were logged
    assert [entry["kind"] for entry in cluster.switch_log] == ["rollout_to_train_s", "rollout_to_train_s"]


def test_back_to_rollout_serves_with_the_new_weights(cluster):
    async def scenario():
        await cluster.switch("cell1", Role.ROLLOUT)
        await cluster.switch(cluster.core_id, Role.ROLLOUT)
        sampling = SamplingParams(temperature=0.0, max_new_tokens=4)
        a = await cluster.cells["cell0"].engine_rank.generate.remote("s", [1, 2, 3, 4], sampling)
        b = await cluster.cells["cell1"].engine_rank.generate.remote("s", [1, 2, 3, 4], sampling)
        return a, b

    a, b = cluster.loop.run_until_complete(scenario())
    assert a.weight_version == b.weight_version == 1
    assert a.response_ids == b.response_ids and a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert {e["kind"] for e in cluster.switch_log[-2:]} == {"train_to_rollout_s"}


def test_process_groups_end_with_their_membership_over_many_switches(cluster):
    """A satellite goes back and forth 25 times (50 switches) and a weight sync runs after each: every rank
    keeps only its current membership's transfer groups, and no file descriptor leaks (one leaked per switch
    would be 50, against the 8 allowed)."""

    async def scenario():
        await cluster.switch("cell1", Role.TRAIN)
        before = await cluster.core.resources()
        for _ in range(25):
            await cluster.switch("cell1", Role.ROLLOUT)
            async with cluster._lock:
                await cluster._sync_weights()
            await cluster.switch("cell1", Role.TRAIN)
        await cluster.switch("cell1", Role.ROLLOUT)
        return before, await cluster.core.resources(), await cluster.cells["cell1"].resources()

    before, core, satellite = cluster.loop.run_until_complete(scenario())
    for rank in core + satellite:
        assert rank["live_groups"] <= 2, rank  # the current membership's: at most a join/leave and a sync
    assert core[0]["groups_made"] - before[0]["groups_made"] >= 50  # each switch made its groups ...
    assert core[0]["groups_ended"] >= core[0]["groups_made"] - 2  # ... and were shut down with their epoch
    assert all(rank["failed_shutdowns"] == 0 for rank in core + satellite)
    for then, now in zip(before, core, strict=True):
        assert now["open_fds"] <= then["open_fds"] + 8, (then, now)


def test_ppo_epochs_make_several_updates_on_the_same_batch_and_one_version(cluster, tiny_model_path):
    """trainer.ppo_epochs=3 on the core and a satellite: the same weights as three whole-batch updates on one
    trainer (the satellite takes the inner updates' weights before each pass), and one new version."""
    first = step_batches()  # the first test's step, replayed so the reference's optimizer state matches
    batches = first[1:]  # the small trees: one micro-batch each, pulled by both trainers
    reference = load_model(tiny_model_path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=0.0)
    step_cfg = StepConfig(attention_backend="block")
    train_step(reference, optimizer, first, LossConfig(), step_cfg)
    expected = [train_step(reference, optimizer, batches, LossConfig(), step_cfg) for _ in range(3)]

    async def scenario():
        await cluster.switch_many({cluster.core_id: Role.TRAIN, "cell1": Role.TRAIN})
        metrics = await cluster.train_step(batches, max_grad_norm=1.0, epochs=3)
        await cluster.switch("cell1", Role.ROLLOUT)
        return metrics

    metrics = cluster.loop.run_until_complete(scenario())
    assert metrics["version"] == 2  # one version for the whole step
    assert metrics["loss"] == pytest.approx(expected[0]["loss"], rel=1e-5, abs=1e-7)  # the first pass's
    assert metrics["last_epoch/ratio_max"] > 1.0  # the later passes ran on moved weights
    core_weights = cluster.core.state_dict().get()
    for name, value in reference.state_dict().items():
        assert torch.allclose(core_weights[name], value, atol=1e-5), name
    sampling = SamplingParams(temperature=0.0, max_new_tokens=2)
    served = cluster.loop.run_until_complete(cluster.cells["cell1"].engine_rank.generate.remote("e", [1, 2, 3], sampling))
    assert served.weight_version == 2  # the satellite serves the step's last weights
