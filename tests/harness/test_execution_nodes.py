"""Executions and proxy replicas on several Ray nodes (``gyre.harness.nodes``), tested on one machine as several
nodes (``ray.cluster_utils``): placement over the nodes, a worker dying mid-run. The main job on simulated
execution nodes is in ``tests/trainer/test_main_job.py``, beside the same job on one machine; the drain across
two proxy replicas sharing one router is in ``tests/trainer/test_live_switch.py``."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from gyre.envs.loaders import load_tasks
from gyre.harness.nodes import NodePool, SimulatedNodes, start_workers

REPO = Path(__file__).resolve().parents[2]
SLOTS = 2  # executions each simulated node runs at once


@pytest.fixture(scope="module")
def two_nodes():
    """A head node plus two execution nodes on this machine (the shared test cluster, if up, is shut down
    first; the next test that needs it starts it again: tests/conftest.py)."""
    import ray

    ray.shutdown()
    nodes = SimulatedNodes(2, SLOTS, head_cpus=2,
                           runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith("GYRE_")}})
    yield nodes
    nodes.shutdown()


def oracle_pool(run_dir: Path) -> NodePool:
    """Workers that run the reference solution (no model: no proxy replica needed)."""
    env = {"sandbox": {"kind": "auto", "allow_unisolated": True}, "eval_retries": 0}
    slots = start_workers(2, harness={"name": "oracle", "progress": False}, env=env, proxy={}, model_path="tiny",
                          run_dir=str(run_dir))
    return NodePool(slots, progress=False)


def terminal_tasks():
    return load_tasks("terminal", REPO / "recipes/terminalbench/tasks").tasks


def slow_start(seconds: float):
    def prepare(workspace: Path) -> None:  # runs on the worker's node, before the harness
        time.sleep(seconds)

    return prepare


def test_every_node_runs_its_agents_on_ports_gyre_chose(two_nodes):
    # Left to Ray, a node's raylet waits ~15 s for its agents to report their ports and aborts on a loaded machine
    import ray

    alive = [node for node in ray.nodes() if node["Alive"]]
    assert len(alive) == 3
    assert sorted(node["MetricsExportPort"] for node in alive) == sorted(p["metrics_export_port"] for p in two_nodes.agent_ports)
    chosen = [port for ports in two_nodes.agent_ports for port in ports.values()]
    assert len(set(chosen)) == len(chosen) == 12


def test_executions_spread_over_the_nodes_and_score_there(two_nodes, tmp_path):
    tasks = terminal_tasks()[:2]

    async def scenario():
        async with oracle_pool(tmp_path) as pool:
            executions = await pool.run(tasks, samples=2)
            return executions, [slot.node_id for slot in pool.slots]

    executions, nodes = asyncio.run(scenario())
    assert len(set(nodes)) == 2  # one worker per execution node
    assert [e.task_id for e in executions] == [t.id for t in tasks for _ in range(2)]
    assert all(e.status == "finished" and e.reward == 1.0 for e in executions), [e.reward_detail for e in executions]
    assert {e.reward_detail["node_id"] for e in executions} == set(nodes)  # 4 executions, 2 slots per node: both used
    assert all(Path(e.workspace).parent.parent == tmp_path / "executions" for e in executions)


def test_a_dead_worker_fails_only_its_executions_and_new_work_goes_elsewhere(two_nodes, tmp_path):
    import ray

    tasks = terminal_tasks()

    async def scenario():
        async with oracle_pool(tmp_path) as pool:
            doomed, survivor = pool.slots
            futures = [pool.submit(tasks[i % len(tasks)], sample_index=i, prepare=slow_start(4.0)) for i in range(4)]
            while doomed.running < SLOTS or survivor.running < SLOTS:  # two on each worker, all still preparing
                await asyncio.sleep(0.05)
            ray.kill(doomed.handle)
            first = await asyncio.gather(*futures)
            later = await pool.run(tasks[:2])
            ray.kill(survivor.handle)  # the last worker: what runs there is lost, then the pool refuses work
            last = await pool.submit(tasks[0])
            assert last.status == "crashed" and last.reward_detail["note"] == "worker_lost"
            with pytest.raises(RuntimeError, match="every execution worker has died"):
                pool.submit(tasks[0])
            return first, later, doomed, survivor

    first, later, doomed, survivor = asyncio.run(scenario())
    lost = [e for e in first if e.status == "crashed"]
    kept = [e for e in first if e.status != "crashed"]
    assert len(lost) == len(kept) == 2
    for execution in lost:
        detail = execution.reward_detail
        assert detail["unscorable"] and detail["note"] == "worker_lost"  # left out of training, not scored 0
        assert "worker0" in detail["error"] and "died" in detail["error"]
    assert all(e.reward == 1.0 and e.reward_detail["node_id"] == survivor.node_id for e in kept)
    assert not doomed.alive and not survivor.alive
    assert all(e.status == "finished" and e.reward_detail["node_id"] == survivor.node_id for e in later)


def test_placement_prefers_a_worker_that_served_the_repository_while_it_has_room():
    from types import SimpleNamespace

    from gyre.harness.nodes import WorkerSlot, choose_worker

    def task(repo: str):
        return SimpleNamespace(meta={"repo": repo}, source=None)

    a, b = WorkerSlot("worker0", None, "n0", capacity=2), WorkerSlot("worker1", None, "n1", capacity=4)
    assert choose_worker([a, b], task("x/y")) is a  # nothing warm: least loaded, then by name
    a.repositories.add("x/y")
    b.running = 0
    a.running = 1
    assert choose_worker([a, b], task("x/y")) is a  # warm and has room, though busier
    assert choose_worker([a, b], task("other/repo")) is b  # not warm anywhere: least loaded
    a.running = 2
    assert choose_worker([a, b], task("x/y")) is b  # warm worker full: least loaded instead
    b.alive = False
    assert choose_worker([a, b], task("x/y")) is a  # the only live one, even full (it queues)
    a.alive = False
    assert choose_worker([a, b], task("x/y")) is None


def test_too_few_execution_nodes_is_a_clear_error(two_nodes):
    from gyre.harness.nodes import execution_nodes

    with pytest.raises(ValueError, match=r"cluster.execution_nodes=3, but only 2 live Ray node\(s\) offer a 'sandbox'"):
        execution_nodes(3)
