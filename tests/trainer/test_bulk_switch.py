"""Several cells switch at once: two satellites join a running step together (one weight broadcast) and the
step still equals one trainer's; then both go back to rollout together and serve the new weights."""

from __future__ import annotations

import asyncio

import pytest
import ray
import torch
from test_cluster import LR, step_batches

from gyre.algo.losses import LossConfig
from gyre.models import load_model
from gyre.rollout.base import SamplingParams
from gyre.scheduler.state import Role
from gyre.trainer.cluster import Cluster, ClusterConfig
from gyre.replica.step import StepConfig, train_step

pytestmark = pytest.mark.slow  # Ray cells and role switches (minutes): out of the fast tier (-m 'not slow')


@pytest.fixture(scope="module")
def cluster(ray_session):
    cfg = ClusterConfig(cells=3, cpus_per_cell=0.5, cell={"lr": LR, "loss": {}, "step": {"attention_backend": "block"}})
    loop = asyncio.new_event_loop()
    cluster = loop.run_until_complete(asyncio.sleep(0, Cluster(cfg)))
    cluster.loop = loop
    yield cluster
    loop.run_until_complete(cluster.close())
    loop.close()


def test_two_satellites_join_a_step_in_one_bulk_and_leave_in_another(cluster, tiny_model_path):
    batches = step_batches()
    reference = load_model(tiny_model_path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=0.0)
    train_step(reference, optimizer, batches, LossConfig(), StepConfig(attention_backend="block"))

    async def scenario():
        await cluster.start_rollout()
        await cluster.switch(cluster.core_id, Role.TRAIN)
        task = asyncio.create_task(cluster.train_step(batches, max_grad_norm=1.0))
        while cluster.step is None or not cluster.step.inflight:
            await asyncio.sleep(0.01)  # the core is on the long first micro-batch
        seconds = await cluster.switch_many({"cell1": Role.TRAIN, "cell2": Role.TRAIN})
        metrics = await task
        back = await cluster.switch_many({"cell1": Role.ROLLOUT, "cell2": Role.ROLLOUT})
        sampling = SamplingParams(temperature=0.0, max_new_tokens=4)
        outputs = [await cluster.cells[c].engine_rank.generate.remote("s", [1, 2, 3, 4], sampling) for c in ("cell1", "cell2")]
        return seconds, metrics, back, outputs

    seconds, metrics, back, outputs = cluster.loop.run_until_complete(scenario())
    assert set(seconds) == {"cell1", "cell2"} and len(set(seconds.values())) == 1  # switched as one
    assert metrics["version"] == 1
    assert sum(metrics[f"microbatches/{c}"] for c in ("cell0", "cell1", "cell2")) == len(batches)
    assert metrics["microbatches/cell1"] + metrics["microbatches/cell2"] >= 1
    core_weights = cluster.core.state_dict().get()
    for name, value in reference.state_dict().items():
        assert torch.allclose(core_weights[name], value, atol=1e-6), name
    assert [e["bulk"] for e in cluster.switch_log if e["cell"] != "cell0"] == [2, 2, 2, 2]
    assert set(back) == {"cell1", "cell2"}
    assert outputs[0].weight_version == outputs[1].weight_version == 1
    assert outputs[0].response_ids == outputs[1].response_ids
