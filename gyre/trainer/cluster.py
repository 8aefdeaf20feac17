"""The driver's handle on the cells: Ray actors, their roles, the rollout and trainer worker groups, role
switches (with the router's drain), streaming training steps and weight sync.

Everything here applies decisions; none of it makes them (that is ``gyre.scheduler``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from gyre.cells.cell import Cell, CellConfig
from gyre.cells.remote import RemoteEngine
from gyre.cells.roles import RoleMachine
from gyre.protocol import PackedBatch
from gyre.scheduler.state import CellView, Role
from gyre.single_controller.worker_group import WorkerGroup
from gyre.trainer.distributed import GroupSpec, host_store
from gyre.trainer.step import reduce_stats
from gyre.trainer.streaming import StreamingStep

log = logging.getLogger(__name__)


@dataclass
class ClusterConfig:
    cells: int = 4
    capacity: int = 4  # concurrent executions a rollout cell serves (the scheduler's C_e)
    call_capacity: int = 16  # concurrent calls a rollout cell serves (the router's limit)
    backend: str = "gloo"
    host: str = "127.0.0.1"
    cpus_per_cell: float = 0.5
    gpus_per_cell: float = 0.0
    cell: dict[str, Any] = field(default_factory=dict)  # CellConfig fields shared by every cell


class Cluster:
    """``router`` is the proxy's router; ``on_router_loop`` runs a coroutine on the loop the router lives on
    (the proxy serves from its own thread), default: this loop."""

    def __init__(self, cfg: ClusterConfig, router: Any | None = None, on_router_loop: Any | None = None):
        if cfg.cells < 1:
            raise ValueError(f"cluster.cells must be >= 1, got {cfg.cells}")
        self.cfg = cfg
        self.router = router
        self.on_router_loop = on_router_loop or (lambda coroutine: coroutine)
        self.store, self.port = host_store(cfg.host)
        self._versions = itertools.count(1)
        actor_cls = ray.remote(num_cpus=cfg.cpus_per_cell, num_gpus=cfg.gpus_per_cell)(Cell)
        self.ids = [f"cell{i}" for i in range(cfg.cells)]
        self.core_id = self.ids[0]
        self.actors = {
            cell_id: actor_cls.options(name=None, max_concurrency=64).remote(
                CellConfig(cell_id=cell_id, is_core=cell_id == self.core_id, **cfg.cell)
            )
            for cell_id in self.ids
        }
        ray.get([actor.ping.remote() for actor in self.actors.values()])
        self.roles = {cell_id: RoleMachine(cell_id) for cell_id in self.ids}
        self.rollout = WorkerGroup("rollout")
        self.trainer = WorkerGroup("trainer")
        self.version = 0
        self.step: StreamingStep | None = None
        self._lock = asyncio.Lock()
        self.switch_log: list[dict[str, Any]] = []
        self.drain_reports: list[Any] = []

    @property
    def core(self) -> Any:
        return self.actors[self.core_id]

    def _spec(self, world: int) -> GroupSpec:
        return GroupSpec(next(self._versions), 0, world, self.cfg.host, self.port, self.cfg.backend)

    @staticmethod
    def _rank(spec: GroupSpec, rank: int) -> GroupSpec:
        return GroupSpec(spec.version, rank, spec.world_size, spec.host, spec.port, spec.backend, spec.timeout_s)

    def views(self) -> tuple[CellView, ...]:
        return tuple(
            CellView(cell_id, self.roles[cell_id].role, cell_id == self.core_id, self.cfg.capacity,
                     self.roles[cell_id].target)
            for cell_id in self.ids
        )

    # Start ------------------------------------------------------------------------------------------

    async def start_rollout(self) -> None:
        """Every cell begins serving rollouts."""
        for cell_id in self.ids:
            await self._switch(cell_id, Role.ROLLOUT)

    # Role switches ----------------------------------------------------------------------------------

    async def switch(self, cell_id: str, to: Role) -> float:
        async with self._lock:
            return await self._switch(cell_id, to)

    async def _switch(self, cell_id: str, to: Role) -> float:
        role = self.roles[cell_id]
        started = time.perf_counter()
        source = role.role
        role.begin(to)
        actor = self.actors[cell_id]
        if to == Role.TRAIN:
            if source == Role.ROLLOUT:
                if self.router is not None and cell_id in self.router.cells:
                    report = await self.on_router_loop(self.router.drain(cell_id))
                    self.drain_reports.append(report)
                self.rollout.remove(cell_id)
            if cell_id == self.core_id:
                await actor.enter_train.remote(None)
            else:
                spec = self._spec(2)
                await asyncio.gather(
                    self.core.send_weights.remote(spec), actor.enter_train.remote(self._rank(spec, 1))
                )
            self.trainer.add(actor, cell_id)
            if self.step is not None:
                self.step.add_member(cell_id, actor)
        else:
            if source == Role.TRAIN:
                if self.step is not None:
                    await self.step.remove_member(cell_id)
                self.trainer.remove(cell_id)
                if cell_id != self.core_id and self.step is not None:
                    await self._push_grads([cell_id])
            await actor.enter_rollout.remote()
            self.rollout.add(actor, cell_id)
            if self.router is not None:
                await self.on_router_loop(self._route_to(cell_id))
        role.finish()
        seconds = time.perf_counter() - started
        if source != Role.IDLE:
            key = "rollout_to_train_s" if to == Role.TRAIN else "train_to_rollout_s"
            self.switch_log.append({"cell": cell_id, "kind": key, "seconds": seconds, "time": time.time()})
        return seconds

    async def _route_to(self, cell_id: str) -> None:
        """Let the router place executions on the cell again (runs on the router's loop)."""
        from gyre.proxy.router import Cell as RoutedCell

        if cell_id in self.router.cells:
            self.router.undrain(cell_id)
        else:
            engine = RemoteEngine(self.actors[cell_id], cell_id)
            self.router.add_cell(RoutedCell(cell_id, engine, capacity=self.cfg.call_capacity))

    async def _push_grads(self, satellites: list[str]) -> None:
        """Sum the satellites' gradients into the core's inbox through one process group."""
        if not satellites:
            return
        spec = self._spec(1 + len(satellites))
        await asyncio.gather(
            self.core.collect_grads.remote(spec),
            *[self.actors[s].push_grads.remote(self._rank(spec, i + 1)) for i, s in enumerate(satellites)],
        )

    # Training ---------------------------------------------------------------------------------------

    async def train_step(self, batches: list[PackedBatch], max_grad_norm: float | None) -> dict[str, Any]:
        """One streaming step over the current (and joining) trainer members, then sync the new weights."""
        started = time.perf_counter()
        self.step = StreamingStep(batches)
        for cell_id in self.trainer.ids:
            self.step.add_member(cell_id, self.actors[cell_id])
        try:
            stats = await self.step.run()
        finally:
            step, self.step = self.step, None
        async with self._lock:
            await self._push_grads([c for c in self.trainer.ids if c != self.core_id])
            result = await self.core.optimizer_step.remote(max_grad_norm)
            self.version = result["version"]
            sync_started = time.perf_counter()
            await self._sync_weights()
        metrics = reduce_stats(stats)
        metrics.update(grad_norm=result["grad_norm"], version=self.version,
                       train_time_s=time.perf_counter() - started, weight_sync_s=time.perf_counter() - sync_started,
                       trainer_members=len(step.done_by), microbatches=step.total)
        for member, count in step.done_by.items():
            metrics[f"microbatches/{member}"] = count
        return metrics

    async def _sync_weights(self) -> None:
        """Broadcast the core's new weights to every other cell (engines load them between calls)."""
        others = [c for c in self.ids if c != self.core_id and self.roles[c].role != Role.DEAD]
        spec = self._spec(1 + len(others))
        await asyncio.gather(
            self.core.send_weights.remote(spec),
            *[self.actors[c].receive_weights.remote(self._rank(spec, i + 1), self.version) for i, c in enumerate(others)],
        )

    # Checkpoints and teardown -----------------------------------------------------------------------

    async def save(self, path: str) -> None:
        await self.core.save_checkpoint.remote(path)

    async def load(self, path: str) -> int:
        self.version = await self.core.load_checkpoint.remote(path)
        async with self._lock:
            await self._sync_weights()
        return self.version

    def seconds_in_roles(self) -> dict[str, dict[str, float]]:
        return {cell_id: machine.seconds_in_roles() for cell_id, machine in self.roles.items()}

    async def close(self) -> None:
        await asyncio.gather(*[actor.close.remote() for actor in self.actors.values()], return_exceptions=True)
        for actor in self.actors.values():
            ray.kill(actor)
