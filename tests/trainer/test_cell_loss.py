"""A cell whose process dies mid-run, by role, on real Ray cells: a satellite lost mid-step leaves the step's
update as it would have been; a rollout cell lost mid-conversation costs its sessions no call."""

from __future__ import annotations

import asyncio

import pytest
import ray
import torch

from gyre.algo.losses import LossConfig
from gyre.models import load_model, load_tokenizer
from gyre.proxy.config import ProxyConfig
from gyre.proxy.routing import LocalRouting
from gyre.proxy.server import ProxyServer, build_proxy
from gyre.replica.step import StepConfig, train_step
from gyre.scheduler.state import Role
from gyre.trainer.cluster import Cluster, ClusterConfig
from gyre.trajectory import pack_trees
from gyre.trajectory.processor import TrajectoryConfig, process_executions
from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

pytestmark = pytest.mark.slow  # Ray cells (a minute): out of the fast tier (-m 'not slow')

LR = 1e-3


def many_batches(count: int = 18):
    """One tree per micro-batch, enough of them that every trainer takes several."""
    spec = WorkloadSpec(turns=4, system_tokens=16, task_tokens=16, response_tokens=(8, 16), tool_tokens=(8, 24))
    executions = [synthetic_execution(f"e{i}", spec, seed=i, group=f"g{i % 4}") for i in range(count)]
    for i, execution in enumerate(executions):
        execution.reward = float(i % 3 == 0)
    trees = process_executions(executions, TrajectoryConfig(max_paths=None))
    return pack_trees(trees, max_tokens=max(t.num_tokens for t in trees))


def test_a_satellite_lost_mid_step_leaves_the_update_as_without_the_loss(ray_session, tiny_model_path):
    batches = many_batches()
    reference = load_model(tiny_model_path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=LR, weight_decay=0.0)
    expected = train_step(reference, optimizer, batches, LossConfig(), StepConfig(attention_backend="block"))
    cfg = ClusterConfig(cells=3, cpus_per_cell=0.5, cell={"lr": LR, "loss": {}, "step": {"attention_backend": "block"}})

    async def scenario():
        cluster = Cluster(cfg)
        try:
            await cluster.start_rollout()
            await cluster.switch_many({cell_id: Role.TRAIN for cell_id in cluster.ids})
            task = asyncio.create_task(cluster.train_step(batches, max_grad_norm=1.0))
            while cluster.step is None or cluster.step.done_by.get("cell2", 0) < 2:
                await asyncio.sleep(0.005)
            ray.kill(cluster.cells["cell2"].engine_rank)  # it holds gradients of >= 2 micro-batches, maybe a third
            metrics = await task
            weights = await cluster.core.state_dict()
            satellite = await cluster.cells["cell1"].state_dict()
            return metrics, weights, satellite, cluster.lost, cluster.membership.state("cell2")
        finally:
            await cluster.close()

    metrics, weights, satellite, lost, state = asyncio.run(scenario())
    assert [entry["cell"] for entry in lost] == ["cell2"] and lost[0]["role"] == "train" and state == "dead"
    assert metrics["cells_lost"] == 1 and metrics["microbatches_redone"] >= 2
    assert metrics["microbatches/cell0"] + metrics["microbatches/cell1"] == len(batches)  # all redone by the live
    assert metrics["microbatches/cell2"] == 0
    assert metrics["version"] == 1
    assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-6, abs=1e-7)
    assert metrics["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-6)
    worst = max((weights[name] - value).abs().max().item() for name, value in reference.state_dict().items())
    assert worst <= 1e-6, f"the update differs from the one without the loss by up to {worst:.2e}"
    assert all(torch.equal(satellite[name], weights[name]) for name in weights)  # the live satellite synced


SESSIONS, TURNS = 6, 4


def test_a_rollout_cell_lost_mid_conversation_costs_no_call(ray_session, tmp_path):
    openai = pytest.importorskip("openai")
    proxy = build_proxy(load_tokenizer("tiny"), [], ProxyConfig(port=0, run_dir=str(tmp_path), fsync=False))
    server = ProxyServer(proxy).start()
    router = proxy.router

    async def scenario():
        cluster = Cluster(ClusterConfig(cells=2, cpus_per_cell=0.5, cell={"rollout": {"kind": "hf", "max_batch_size": 16}}),
                          routing=LocalRouting(router, server.on_loop))
        try:
            await cluster.start_rollout()
            keys = {f"ex{i}": proxy.open_execution(f"ex{i}") for i in range(SESSIONS)}
            turns_done = dict.fromkeys(keys, 0)

            async def session(name: str, key: str) -> None:
                client = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key=key, max_retries=0, timeout=120)
                messages = [{"role": "system", "content": "You are terse."}]
                for turn in range(TURNS):
                    messages.append({"role": "user", "content": f"turn {turn} of {name}"})
                    reply = await client.chat.completions.create(model="gyre", messages=messages, max_tokens=32,
                                                                 temperature=1.0)
                    messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
                    turns_done[name] += 1
                await client.close()

            clients = asyncio.gather(*[session(n, k) for n, k in keys.items()])
            # every session has a call answered, and cell1 has calls in flight: then its process dies
            while min(turns_done.values()) < 1 or router.stats()["cells"].get("cell1", {}).get("inflight", 0) == 0:
                await asyncio.sleep(0.002)
            ray.kill(cluster.cells["cell1"].engine_rank)
            await clients
            return cluster.lost, cluster.membership.state("cell1"), router.stats()
        finally:
            await cluster.close()

    try:
        lost, state, stats = asyncio.run(scenario())
    finally:
        server.stop()
    assert [entry["cell"] for entry in lost] == ["cell1"] and lost[0]["role"] == "rollout" and state == "dead"
    assert stats["cells_lost"] == 1 and list(stats["cells"]) == ["cell0"]
    records = {f"ex{i}": proxy.records(f"ex{i}") for i in range(SESSIONS)}
    for name, calls in records.items():  # every call answered once, recorded once, on one growing path
        assert len(calls) == TURNS and len({r.call_id for r in calls}) == TURNS, name
        for earlier, later in zip(calls, calls[1:]):
            assert later.prompt_ids[: len(earlier.prompt_ids) + len(earlier.response_ids)] == \
                earlier.prompt_ids + earlier.response_ids
    retried = [r for calls in records.values() for r in calls
               if any(move["reason"] == "cell_lost" for move in r.meta.get("reroutes", []))]
    assert retried, "a call in flight on the lost cell was retried elsewhere"
    assert all(r.cell_id == "cell0" for r in retried)
    assert any(r.cell_id == "cell1" for calls in records.values() for r in calls)  # it did serve before


def test_a_run_survives_losing_a_satellite_a_rollout_cell_and_the_core(tmp_path):
    """``cluster.kill_cells`` kills a training satellite mid-step 1, a rollout cell mid-call in step 2 and the core
    mid-step 3 of a 4-step run: the run ends with every step logged once, the satellite's micro-batches redone,
    and the core rebuilt from the step-2 checkpoint (step 3 redone once)."""
    import json
    import os
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    kills = "[{cell:cell3,step:1,during:step},{cell:cell1,step:2,during:rollout},{cell:cell0,step:3,during:step}]"
    overrides = [
        "+recipe=terminalbench", "scheduler=async", "scheduler.rollout_cells=2", f"run_dir={run_dir}",
        "trainer.total_steps=4", "cluster.cells=4", "scheduler.batch_size=8", "trainer.group_size=2",
        "harness.max_turns=2", "harness.reference.sub_agent=false", "harness.progress=false",
        "tracking.backends=[jsonl]", "trainer.max_tokens_per_microbatch=256", f"cluster.kill_cells={kills}",
    ]
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and [s["version"] for s in steps] == [1, 2, 3, 4]
    assert steps[0]["cells/lost"] == 1 and steps[0]["cells/microbatches_redone"] >= 1
    assert steps[0]["microbatches/cell3"] == 0 and steps[0]["microbatches/cell0"] == steps[0]["microbatches"]
    assert steps[1]["cells/lost"] == 2  # the rollout cell too
    restarts = (run_dir / "core_restarts.jsonl").read_text().splitlines()
    assert len(restarts) == 1 and "cell0" in json.loads(restarts[0])["error"]
    output = done.stdout + done.stderr
    assert "never found their moment" not in output  # every kill landed
    assert "resumed from" in output and "step_000002" in output
    assert "cell cell2 is lost" not in output  # the restarted cells are routed to, not the old ones
