"""Executions on several Ray nodes: one `ExecutionWorker` per execution node, placed by the driver's `NodePool`.

A worker owns its node's executions: workspaces, sandboxes, harness processes and scoring (a local
`ExecutionPool`), and a proxy replica on the node's loopback that its harnesses call (``gyre.proxy.replica``:
the per-call work stays on the node, and the replica routes its node's executions to the cells; the driver
sets the cells, drains included, on every replica at once through the workers' ``route`` / ``drain``).
Records are written by the replica that served the call, under the run's ``records/`` folder on that node,
and come back with each `Execution` (no shared filesystem needed).

The driver's `NodePool` has `ExecutionPool`'s interface (``submit`` / ``run`` / ``close``), so the training
loop and validation use it unchanged. It places each execution on the least-loaded live worker, preferring
one that already ran a task of the same repository (its mirror and caches are warm) while that worker has
room. A worker that dies fails its running executions as ``crashed`` (reason in the detail, left out of
training as unscorable: the policy did not cause it), and new executions go to the workers still alive.

Which nodes: those whose Ray resources include ``sandbox`` (``ray start --resources='{"sandbox": 16}'``).
A worker reserves its node's whole ``sandbox`` amount and runs ``sandbox / cluster.sandbox_per_execution``
executions at once. ``cluster.simulate_execution_nodes`` starts such nodes on this one machine
(``ray.cluster_utils.Cluster``), to try the layout, or test it, without a cluster.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyre.harness.execution import new_execution_id
from gyre.harness.pool import Pool, PoolProgress
from gyre.protocol import Execution

if TYPE_CHECKING:
    from gyre.envs import Task

log = logging.getLogger(__name__)

SANDBOX_RESOURCE = "sandbox"


class ExecutionWorker:
    """One node's executions and proxy replica (a Ray actor: ``ray.remote(ExecutionWorker)``).

    ``harness``, ``env`` and ``proxy`` are the plain config sections. A harness that uses no model (the
    oracle) gets no replica."""

    def __init__(self, harness: dict[str, Any], env: dict[str, Any], proxy: dict[str, Any], model_path: str,
                 run_dir: str, concurrency: int) -> None:
        import ray

        from gyre.envs import Sandbox
        from gyre.harness.config import HarnessConfig
        from gyre.harness.endpoint import ProxyEndpoint
        from gyre.harness.factory import make_runner
        from gyre.harness.harnesses import get_harness
        from gyre.harness.pool import ExecutionPool
        from gyre.proxy.replica import ProxyReplica

        harness_config = HarnessConfig.from_mapping(harness)
        sandbox = Sandbox.from_config(env.get("sandbox"))
        self.replica: ProxyReplica | None = None
        endpoint = None
        if get_harness(harness_config.name).uses_model:
            self.replica = ProxyReplica(proxy, model_path, run_dir)
            endpoint = ProxyEndpoint(self.replica.server)
        runner = make_runner(harness_config, sandbox=sandbox, run_dir=Path(run_dir) / "executions",
                             eval_retries=int(env.get("eval_retries", 2)), endpoint=endpoint)
        self.pool = ExecutionPool(runner, concurrency=concurrency, score_concurrency=harness_config.score_concurrency,
                                  progress=False)
        self._running: dict[str, asyncio.Future[Execution]] = {}
        self.node_id = ray.get_runtime_context().get_node_id()

    def describe(self) -> dict[str, Any]:
        """Where this worker runs and its replica's address (None without one)."""
        import os

        return {"node_id": self.node_id, "pid": os.getpid(),
                "proxy": self.replica.base_url() if self.replica is not None else None,
                "concurrency": self.pool.concurrency}

    async def run(self, task: Task, group: str, sample_index: int, execution_id: str, time_limit_s: float | None,
                  max_calls: int | None, prepare: Callable[[Path], None] | None) -> Execution:
        future = self.pool.submit(task, group, sample_index, execution_id=execution_id, time_limit_s=time_limit_s,
                                  max_calls=max_calls, prepare=prepare)
        self._running[execution_id] = future
        try:
            execution = await future
        finally:
            self._running.pop(execution_id, None)
        execution.reward_detail["node_id"] = self.node_id  # where it ran (its workspace and logs are there)
        return execution

    async def cancel(self, execution_id: str) -> bool:
        """Stop one execution (its harness is killed and its key closed); False if it is not running here."""
        future = self._running.pop(execution_id, None)
        if future is None:
            return False
        future.cancel()
        await asyncio.gather(future, return_exceptions=True)
        return True

    # The replica's cells, set by the driver on every worker at once (gyre.proxy.routing.ReplicatedRouting)

    async def route(self, engines: dict[str, Any], capacity: int) -> None:
        if self.replica is not None:
            await self.replica.route(engines, capacity)

    async def drain(self, cell_ids: list[str]) -> list[Any]:
        return await self.replica.drain(cell_ids) if self.replica is not None else []

    async def lose(self, cell_ids: list[str], reason: str = "its process died") -> None:
        if self.replica is not None:
            await self.replica.lose(cell_ids, reason)

    async def inflight(self) -> dict[str, int]:
        return await self.replica.inflight() if self.replica is not None else {}

    async def occupancy(self) -> Any:
        from gyre.proxy.router import Occupancy

        return await self.replica.occupancy() if self.replica is not None else Occupancy()

    async def close(self) -> None:
        await self.pool.close()
        if self.replica is not None:
            self.replica.stop()


@dataclass(eq=False)
class WorkerSlot:
    """The driver's view of one worker: its handle, capacity, load and the repositories it has served."""

    name: str
    handle: Any
    node_id: str
    capacity: int
    running: int = 0
    alive: bool = True
    repositories: set[str] = field(default_factory=set)

    @property
    def load(self) -> float:
        return self.running / self.capacity


def repository_of(task: Task) -> str:
    """What a worker caches per task: the repository (SWE rows name it), else the workspace source."""
    return str(task.meta.get("repo") or task.source.describe())


def choose_worker(slots: Sequence[WorkerSlot], task: Task) -> WorkerSlot | None:
    """The least-loaded live worker, preferring one that served the task's repository while it has room."""
    alive = [slot for slot in slots if slot.alive]
    if not alive:
        return None
    repository = repository_of(task)
    warm = [slot for slot in alive if repository in slot.repositories and slot.running < slot.capacity]
    return min(warm or alive, key=lambda slot: (slot.load, slot.running, slot.name))


def worker_lost(task: Task, group: str, sample_index: int, execution_id: str, reason: str) -> Execution:
    """The execution a dead worker could not deliver: crashed, unscorable, with the reason."""
    detail = {"unscorable": True, "note": "worker_lost", "error": reason, "stop_reason": "error", "num_calls": 0,
              "sample_index": sample_index}
    return Execution(id=execution_id, task_id=task.id, group=group, calls=[], status="crashed", reward=0.0,
                     reward_detail=detail, domain=task.domain)


class NodePool(Pool):
    """`ExecutionPool`'s interface over execution workers on several nodes (see the module docstring)."""

    def __init__(self, slots: Sequence[WorkerSlot], *, progress: bool = True, label: str = "executions") -> None:
        if not slots:
            raise ValueError("a NodePool needs at least one execution worker")
        super().__init__()
        self.slots = list(slots)
        self.concurrency = sum(slot.capacity for slot in self.slots)
        self.progress = PoolProgress(progress, label)

    def submit(
        self,
        task: Task,
        group: str | None = None,
        sample_index: int = 0,
        *,
        execution_id: str | None = None,
        time_limit_s: float | None = None,
        max_calls: int | None = None,
        prepare: Callable[[Path], None] | None = None,
    ) -> asyncio.Future[Execution]:
        """Place one execution on a worker now; the future resolves to its `Execution`. Raises once every
        worker has died: a run cannot go on without them (executions lost already came back as crashed)."""
        group = group or task.id
        execution_id = execution_id or new_execution_id(task.id, sample_index)
        slot = choose_worker(self.slots, task)
        if slot is None:
            raise RuntimeError(f"every execution worker has died ({', '.join(s.name for s in self.slots)}); "
                               "see the Ray logs of their nodes")
        slot.running += 1  # counted from now, so that the next submission sees this one
        slot.repositories.add(repository_of(task))
        self.progress.submitted()
        return self._track(asyncio.ensure_future(self._run(slot, task, group, sample_index, execution_id,
                                                           time_limit_s, max_calls, prepare)))

    async def _run(self, slot: WorkerSlot, task: Task, group: str, sample_index: int, execution_id: str,
                   time_limit_s: float | None, max_calls: int | None, prepare: Any) -> Execution:
        from ray.exceptions import RayActorError

        self.progress.started()
        execution: Execution | None = None
        try:
            execution = await slot.handle.run.remote(task, group, sample_index, execution_id, time_limit_s,
                                                     max_calls, prepare)
            return execution
        except asyncio.CancelledError:
            slot.handle.cancel.remote(execution_id)  # its harness is killed and its key closed on the node
            raise
        except RayActorError as error:
            if slot.alive:
                log.error("execution worker %s (node %s) died; its running executions fail as crashed", slot.name,
                          slot.node_id[:12])
            slot.alive = False
            execution = worker_lost(task, group, sample_index, execution_id,
                                    f"execution worker {slot.name} on node {slot.node_id[:12]} died: {type(error).__name__}")
            return execution
        finally:
            slot.running -= 1
            self.progress.finished(execution)

    async def stop(self) -> None:
        """Cancel what still runs; the workers stay up for another pool over the same slots (the job's next
        attempt after a core restart)."""
        await self.cancel_all()
        self.progress.close()

    async def close(self) -> None:
        """Cancel what still runs, close the workers (their replicas flush their records) and end them."""
        await self.stop()
        await end_workers(self.slots)


async def end_workers(slots: Sequence[WorkerSlot]) -> None:
    """Close the live workers (their replicas flush their records) and end their processes."""
    import ray

    live = [slot for slot in slots if slot.alive]
    await asyncio.gather(*[slot.handle.close.remote() for slot in live], return_exceptions=True)
    for slot in live:
        ray.kill(slot.handle)
        slot.alive = False


def execution_nodes(count: int) -> list[dict[str, Any]]:
    """The first ``count`` live Ray nodes that offer the ``sandbox`` resource (by node id), or a clear error."""
    import ray

    nodes = sorted((node for node in ray.nodes() if node["Alive"] and node["Resources"].get(SANDBOX_RESOURCE, 0) > 0),
                   key=lambda node: node["NodeID"])
    if len(nodes) < count:
        raise ValueError(
            f"cluster.execution_nodes={count}, but only {len(nodes)} live Ray node(s) offer a {SANDBOX_RESOURCE!r} "
            f"resource (start them with ray start --resources='{{\"{SANDBOX_RESOURCE}\": N}}', or set "
            "cluster.simulate_execution_nodes=true to start them on this machine)"
        )
    return nodes[:count]


def start_workers(count: int, *, harness: dict[str, Any], env: dict[str, Any], proxy: dict[str, Any], model_path: str,
                  run_dir: str, sandbox_per_execution: float = 1.0) -> list[WorkerSlot]:
    """One `ExecutionWorker` on each of ``count`` execution nodes; returns their slots once all are up."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if sandbox_per_execution <= 0:
        raise ValueError(f"cluster.sandbox_per_execution must be > 0, got {sandbox_per_execution}")
    remote = ray.remote(ExecutionWorker)
    slots = []
    for index, node in enumerate(execution_nodes(count)):
        amount = node["Resources"][SANDBOX_RESOURCE]
        capacity = max(1, math.floor(amount / sandbox_per_execution + 1e-9))
        handle = remote.options(
            num_cpus=0, resources={SANDBOX_RESOURCE: amount}, max_concurrency=100_000, name=None,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(harness, env, proxy, model_path, run_dir, capacity)
        slots.append(WorkerSlot(f"worker{index}", handle, node["NodeID"], capacity))
    ray.get([slot.handle.describe.remote() for slot in slots])  # fail here if a worker cannot start
    return slots


class SimulatedNodes:
    """A Ray cluster on this machine: the head (cells, driver) plus ``count`` execution nodes, each with
    ``sandbox`` = ``slots`` (``ray.cluster_utils.Cluster``). Connects this process's Ray to it."""

    def __init__(self, count: int, slots: int, *, head_cpus: int | None = None, runtime_env: dict[str, Any] | None = None):
        import os

        import ray
        from ray.cluster_utils import Cluster as RayCluster

        from gyre.ports import agent_ports

        self.agent_ports = agent_ports(1 + count)  # else a loaded machine can abort a node's start
        head_ports, *node_ports = self.agent_ports
        self.cluster = RayCluster(initialize_head=True, head_node_args={
            "num_cpus": head_cpus if head_cpus is not None else os.cpu_count() or 1, "include_dashboard": False,
            **head_ports})
        for ports in node_ports:
            self.cluster.add_node(num_cpus=0, resources={SANDBOX_RESOURCE: slots}, **ports)
        self.cluster.wait_for_nodes()
        ray.init(address=self.cluster.address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env=runtime_env)

    def shutdown(self) -> None:
        import ray

        ray.shutdown()
        self.cluster.shutdown()
