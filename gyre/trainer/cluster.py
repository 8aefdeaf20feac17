"""The driver's handle on the cells: their roles, the rollout and trainer worker groups, role switches
(with the router's drain), streaming training steps and weight sync.

A cell is ``cluster.ranks_per_cell`` Ray actors (``gyre.cells.Cell``) holding one training replica, FSDP2
sharded over them when there are several. The trainer is a worker group over cells: a step is one streaming
group call (``trainer.train(batches)``) that cells joining mid-step start pulling from at once. Weights and
gradients move between cells shard to shard (``gyre.replica.transfer``), in groups that belong to a
membership epoch: every bulk switch starts one, and each rank ends its groups of older epochs, so live
process groups stay bounded however many switches a run makes.

A cell whose process (or node) dies is lost (``lose``; seen at once through ``gyre.cells.lifeline``, or by the
step that was feeding it): it leaves every group as ``dead`` in the membership, which the scheduler sees.
A satellite lost mid-step costs nothing but time: the micro-batches it took this step are redone by the
other trainers (its gradients died with it), so the step makes the same update. A rollout cell's calls in
flight are retried on the other rollout cells by the router. The core holds the optimizer: its loss ends
the run with ``CoreLostError`` (``gyre.job`` restarts it from the last checkpoint).

Everything here applies decisions; none of it makes them (that is ``gyre.scheduler``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import remove_placement_group

from gyre.cells.cell import Cell
from gyre.cells.config import CellConfig
from gyre.cells.lifeline import CellWatch, is_process_death
from gyre.protocol import PackedBatch
from gyre.proxy.routing import LocalRouting, ReplicatedRouting
from gyre.replica.step import reduce_stats, rescale_stats
from gyre.replica.transfer import Transfer, host_store
from gyre.scheduler.state import CellView, Role
from gyre.single_controller import Membership, StreamCall, WorkerGroup

log = logging.getLogger(__name__)


class CoreLostError(RuntimeError):
    """The core cell's process died: the weights' optimizer state went with it."""


@dataclass
class ClusterConfig:
    cells: int = 4
    capacity: int = 4  # concurrent executions a rollout cell serves (the scheduler's C_e)
    call_capacity: int = 16  # concurrent calls a rollout cell serves (the router's limit)
    backend: str = "gloo"
    host: str = "127.0.0.1"
    cpus_per_cell: float = 0.5
    gpus_per_cell: float = 0.0
    ranks_per_cell: int = 1  # processes per cell; > 1 shards each training replica over them (FSDP2)
    weight_sync_bucket_mb: float = 256.0  # weights move between cells in buckets of at most this many MiB
    fsdp_reshard_after_forward: bool = False  # sharded replicas train layer by layer (a layer's weights at a time)
    cell: dict[str, Any] = field(default_factory=dict)  # CellConfig fields shared by every cell
    start_timeout_s: float = 1800.0  # cells must be placed and started (model, engine) within this
    max_cell_restarts: int = 3  # lost satellites replaced, and core rebuilds from a checkpoint (gyre.job), each at most
    kill_cells: list[dict[str, Any]] = field(default_factory=list)  # faults to inject (gyre.trainer.faults)


class Cluster:
    """``routing`` reaches the router(s) the rollout cells serve through: the proxy's in this process
    (`gyre.proxy.routing.LocalRouting`) or the execution nodes' replicas (`ReplicatedRouting`); None: no
    proxy (training-only use)."""

    def __init__(self, cfg: ClusterConfig, routing: LocalRouting | ReplicatedRouting | None = None):
        if cfg.cells < 1:
            raise ValueError(f"cluster.cells must be >= 1, got {cfg.cells}")
        self.cfg = cfg
        self.routing = routing
        self.store, self.port = host_store(cfg.host)
        self.epoch = 0  # bulk role switches so far (transfer groups belong to an epoch); not Membership.version
        self.ids = [f"cell{i}" for i in range(cfg.cells)]
        self.core_id = self.ids[0]
        self.cells = {cell_id: self._make_cell(cell_id) for cell_id in self.ids}
        self._wait_for_cells()
        # The one record of which cell is where; the trainer group, the scheduler's view and the role timeline
        # all read it. Group names are the roles' names.
        self.membership = Membership(self.ids)
        self.trainer = WorkerGroup(Role.TRAIN.value, Cell, membership=self.membership, handles=self.cells,
                                   lost=self._lost_in_step)
        self.lost: list[dict[str, Any]] = []  # cells lost, in order: cell, the role it had, time, error
        self.core_lost: BaseException | None = None
        self.watch = CellWatch(self.lose)
        self.replaced: list[str] = []  # satellites replaced after their loss, in order
        self._losing: set[asyncio.Future] = set()
        # The policy's weight version, counted here and nowhere else: the number of steps the core's weights
        # have taken. Cells are told it when weights move; engines stamp calls with the version they hold.
        self.version = 0
        self.step: StreamCall | None = None
        self.step_members: set[str] = set()  # cells in the trainer group at any time during the running step
        self._lock = asyncio.Lock()
        self.switch_log: list[dict[str, Any]] = []
        self.drain_reports: list[Any] = []
        self.microbatch_s: list[float] = []  # every trained micro-batch's seconds, over the run
        self.microbatches: list[int] = []  # micro-batches of each finished step
        self.stepping = False  # from train_step's start to its new weights being out
        self.redone_microbatches = 0  # micro-batches trained again because the satellite holding them was lost

    def _wait_for_cells(self) -> None:
        """Every cell started; a clear error, not a hang, when Ray cannot place them (their resources taken)."""
        pending = [ref for cell in self.cells.values() for ref in cell.ready().pending]
        try:
            ray.get(pending, timeout=self.cfg.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            need = {"CPU": self.cfg.cells * self.cfg.cpus_per_cell, "GPU": self.cfg.cells * self.cfg.gpus_per_cell}
            raise RuntimeError(
                f"the {self.cfg.cells} cells did not start within cluster.start_timeout_s={self.cfg.start_timeout_s:g}s: "
                f"they need {need}; Ray has {ray.cluster_resources()} of which free {ray.available_resources()}"
            ) from None

    def _make_cell(self, cell_id: str) -> Cell:
        cfg = self.cfg
        return Cell(CellConfig(cell_id=cell_id, is_core=cell_id == self.core_id, ranks=cfg.ranks_per_cell,
                               bucket_mb=cfg.weight_sync_bucket_mb, reshard_after_forward=cfg.fsdp_reshard_after_forward,
                               **cfg.cell),
                    (cfg.host, self.port), cpus=cfg.cpus_per_cell, gpus=cfg.gpus_per_cell, backend=cfg.backend)

    @property
    def core(self) -> Cell:
        return self.cells[self.core_id]

    def _transfer(self, purpose: str, cells: list[str]) -> Transfer:
        """A movement between ``cells`` (the core first: it sends, or receives the reduction)."""
        return Transfer(self.epoch, purpose, tuple(cells), self.cfg.host, self.port, self.cfg.backend)

    def role(self, cell_id: str) -> Role:
        """SWITCHING from the moment a switch is asked for (as the simulator shows it), else the cell's state."""
        if self.membership.target_of(cell_id) is not None:
            return Role.SWITCHING
        return Role(self.membership.state(cell_id))

    def views(self) -> tuple[CellView, ...]:
        """Each cell as the policy sees it; ``active``, the sessions holding one of its engine slots, as the
        router last counted them (a cell it does not route holds none; None without routing)."""
        def target(cell_id: str) -> Role | None:
            to = self.membership.target_of(cell_id)
            return None if to is None else Role(to)

        active = self.routing.occupancy().active if self.routing is not None else None
        return tuple(CellView(cell_id, self.role(cell_id), cell_id == self.core_id, self.cfg.capacity, target(cell_id),
                              active=None if active is None else active.get(cell_id, 0))
                     for cell_id in self.ids)

    def parking(self) -> tuple[float, int]:
        """(share of its time a live session holds an engine slot, sessions parked now), as the router last
        measured them (``gyre.proxy.router.Occupancy``); (1, 0) without routing or parking."""
        if self.routing is None:
            return 1.0, 0
        occupancy = self.routing.occupancy()
        return occupancy.slot_share, occupancy.parked

    # Start ------------------------------------------------------------------------------------------

    async def start_rollout(self) -> None:
        """Every cell begins serving rollouts (and is watched from then on)."""
        for cell_id, cell in self.cells.items():
            self.watch.watch(cell_id, cell.ranks.members)
        await self.switch_many({cell_id: Role.ROLLOUT for cell_id in self.ids})

    # Losing cells -----------------------------------------------------------------------------------

    def lose(self, cell_id: str, error: BaseException) -> None:
        """``cell_id``'s process died: out of every group (``dead``), its other ranks stopped (they would wait
        on it in collectives), and out of routing. Idempotent."""
        if self.watch.stopped or self.membership.is_dead(cell_id):
            return
        role = self.membership.state(cell_id)
        log.error("cell %s (%s) is lost: %s", cell_id, role, error)
        self.lost.append({"cell": cell_id, "role": role, "time": time.time(), "error": str(error)[:500]})
        for actor in self.cells[cell_id].ranks.members:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.membership.fail([cell_id])
        if cell_id == self.core_id:
            self.core_lost = error
        if self.routing is not None:
            self._background(self.routing.lose([cell_id]))
        if cell_id != self.core_id and len(self.replaced) < self.cfg.max_cell_restarts:
            self._background(self.replace(cell_id))

    def _background(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._losing.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task) -> None:
        self._losing.discard(task)
        if not task.cancelled() and task.exception() is not None and not self.watch.stopped:
            log.error("handling a lost cell failed: %r", task.exception())

    async def replace(self, cell_id: str) -> None:
        """A new cell for a lost satellite, under its id: it starts idle with the core's current weights, and
        the scheduler moves it like any other. (On a cluster, Ray places it where resources are free: a
        restarted node, or a new one.)"""
        self.replaced.append(cell_id)
        old = self.cells[cell_id]
        try:
            remove_placement_group(old.placement)  # its resources, for the replacement
        except Exception:  # noqa: BLE001 - already gone with its node
            pass
        cell = self._make_cell(cell_id)
        try:
            await cell.ready()
            async with self._lock:  # weights move between steps and switches, never during
                self.cells[cell_id] = cell
                self.membership.revive(cell_id)
                self.watch.watch(cell_id, cell.ranks.members)
                self.epoch += 1
                await self._sync_weights([cell_id], "replace")
        except asyncio.CancelledError:  # the cluster closes first: the new cell must not outlive it
            await cell.close()
            raise
        log.warning("cell %s replaced: idle with the policy's version %d", cell_id, self.version)

    async def _switch_failed(self, moves: dict[str, Role], error: BaseException) -> None:
        """A bulk switch failed: the cells it involved (and the core, which sends the weights) whose process died
        are lost; the live ones are left idle (in no group, asleep or not), for the scheduler to move again."""
        involved = {*moves, self.core_id}
        alive = await asyncio.gather(*[self._answers(cell_id) for cell_id in involved])
        for cell_id, answered in zip(involved, alive):
            if answered is not True:
                self.lose(cell_id, answered)
        log.error("switching %s failed (%s); live cells of the switch are left idle",
                  {c: to.value for c, to in moves.items()}, error)
        self.membership.abandon([c for c in moves if not self.membership.is_dead(c)])

    async def _answers(self, cell_id: str) -> bool | BaseException:
        """True if every rank of the cell answers a ping; else the error that says its process died."""
        if self.membership.is_dead(cell_id):
            return True  # already lost
        try:
            await self.cells[cell_id].ready()
            return True
        except Exception as error:  # noqa: BLE001
            return error if is_process_death(error) else True

    def _lost_in_step(self, cell_id: str, error: BaseException) -> bool:
        """A trainer's error in a step: a satellite whose process died is lost and its micro-batches redone."""
        if not is_process_death(error):
            return False
        self.lose(cell_id, error)
        return cell_id != self.core_id

    def alive(self) -> list[str]:
        return [cell_id for cell_id in self.ids if not self.membership.is_dead(cell_id)]

    async def engine_stats(self, timeout_s: float = 5.0) -> dict[str, dict[str, float]]:
        """Each cell's engine counters now (``gyre.rollout`` engines' ``stats``), serving or asleep in training (a
        colocate step ends with every cell training: its rollout's counters are read there); a switching cell,
        or one that does not answer within ``timeout_s``, is left out (it is busy or dying: the metrics wait for
        no one; its counters count on and show in a later step)."""
        serving = [c for c in self.alive() if self.role(c) in (Role.ROLLOUT, Role.TRAIN)]
        calls = [asyncio.ensure_future(self._stats_of(c)) for c in serving]
        if not calls:
            return {}
        done, pending = await asyncio.wait(calls, timeout=timeout_s)
        for call in pending:
            call.cancel()
        return dict(call.result() for call in done if call.exception() is None)

    async def _stats_of(self, cell_id: str) -> tuple[str, dict[str, float]]:
        return cell_id, await self.cells[cell_id].engine_rank.stats.remote()

    # Role switches ----------------------------------------------------------------------------------

    async def switch(self, cell_id: str, to: Role) -> float:
        return (await self.switch_many({cell_id: to}))[cell_id]

    def switch_many(self, moves: dict[str, Role]) -> Coroutine[Any, Any, dict[str, float]]:
        """Switch several cells at once, each to its role; returns each cell's switch seconds.

        The cells switch concurrently: the leaving rollout cells are marked draining together, so no drain
        moves sessions onto a cell that is itself leaving; satellites joining training pull the core's
        weights through one broadcast group; satellites leaving a running step push their gradients through
        one reduce. One bulk at a time (and never during a step's optimizer and weight-sync tail): the lock
        keeps process groups and the trainer membership consistent. The moves are planned when this is called
        (the cells show their targets from then on, and a conflicting move fails here) and applied, when the
        returned coroutine runs, as soon as the lock is free."""
        self.membership.plan({cell_id: to.value for cell_id, to in moves.items()})
        return self._switch_when_free(moves)

    async def _switch_when_free(self, moves: dict[str, Role]) -> dict[str, float]:
        async with self._lock:
            return await self._switch_many(moves)

    async def _switch_many(self, moves: dict[str, Role]) -> dict[str, float]:
        started = time.perf_counter()
        self.epoch += 1
        sources = {cell_id: Role(self.membership.state(cell_id)) for cell_id in moves}
        self.membership.leave(moves)  # out of their groups: a running step's stream gives them nothing more
        joining = [c for c, to in moves.items() if to == Role.TRAIN]
        leaving = [c for c, to in moves.items() if to == Role.ROLLOUT]
        try:
            await asyncio.gather(self._to_train(joining, sources), self._to_rollout(leaving, sources))
        except Exception as error:
            await self._switch_failed(moves, error)
            raise
        seconds = time.perf_counter() - started
        self.membership.enter(moves)  # a running step's stream hands joining cells work at once
        for cell_id, to in moves.items():
            if sources[cell_id] != Role.IDLE:
                key = "rollout_to_train_s" if to == Role.TRAIN else "train_to_rollout_s"
                self.switch_log.append({"cell": cell_id, "kind": key, "seconds": seconds, "time": time.time(),
                                        "bulk": len(moves)})
        return dict.fromkeys(moves, seconds)

    async def _to_train(self, cell_ids: list[str], sources: dict[str, Role]) -> None:
        if not cell_ids:
            return
        serving = [c for c in cell_ids if sources[c] == Role.ROLLOUT]
        if serving and self.routing is not None:
            self.drain_reports += await self.routing.drain(serving)
        satellites = [c for c in cell_ids if c != self.core_id]
        entering = [self.core.enter_train(None)] if self.core_id in cell_ids else []
        if satellites:  # one broadcast of the core's weights to every joining satellite
            transfer = self._transfer("join", [self.core_id, *satellites])
            entering.append(self.core.send_weights(transfer))
            entering += [self.cells[c].enter_train(transfer) for c in satellites]
        await asyncio.gather(*entering)
        if self.step is not None:
            self.step_members.update(cell_ids)

    async def _to_rollout(self, cell_ids: list[str], sources: dict[str, Role]) -> None:
        if not cell_ids:
            return
        training = [c for c in cell_ids if sources[c] == Role.TRAIN]
        await self.trainer.release(training)  # the micro-batches they hold finish: their gradients count
        if self.step is not None:
            await self._push_grads([c for c in training if c != self.core_id], "leave")
        await asyncio.gather(*[self.cells[c].enter_rollout(self.version) for c in cell_ids])
        if self.routing is not None:
            await self.routing.route({c: self.cells[c].engine_rank for c in cell_ids}, self.cfg.call_capacity)

    async def _push_grads(self, satellites: list[str], purpose: str) -> None:
        """Sum the satellites' gradients into the core's inbox, shard to shard."""
        if not satellites:
            return
        transfer = self._transfer(purpose, [self.core_id, *satellites])
        await asyncio.gather(self.core.collect_grads(transfer), *[self.cells[s].push_grads(transfer) for s in satellites])

    # Training ---------------------------------------------------------------------------------------

    async def train_step(self, batches: list[PackedBatch], max_grad_norm: float | None,
                         more: AsyncIterator[list[PackedBatch]] | None = None,
                         grad_scale: Callable[[], float] | None = None, epochs: int = 1) -> dict[str, Any]:
        """One streaming step over the current (and joining) trainer members, then sync the new weights.

        ``more``: the rest of a step that started on part of its batch, micro-batches as they are packed (the
        step ends once it is exhausted and every micro-batch is done); ``grad_scale()``: asked once the
        micro-batches are all in, the factor the summed gradients (and the weighted statistics) are scaled by
        before the optimizer step (the batch's final normalisation). ``epochs`` > 1: after the first update the
        trainer members pass over the same micro-batches again, ``epochs - 1`` more times, one optimizer step
        each (PPO epochs; the loss's clip bounds how far the later passes move from the behaviour policy)."""
        if epochs < 1:
            raise ValueError(f"trainer.ppo_epochs must be >= 1, got {epochs}")
        started = time.perf_counter()
        self.stepping = True
        self.step_members = set(self.trainer.ids)
        self.step = self.trainer.stream("train", batches) if more is not None else self.trainer.train(batches)
        trained = list(batches)  # the whole batch, for the later epochs
        feeding = asyncio.ensure_future(self._feed(self.step, more, trained)) if more is not None else None
        try:
            try:
                try:
                    stats = await self.step
                except Exception as error:
                    if self.core_lost is not None:
                        raise CoreLostError(f"the core cell {self.core_id} died mid-step: {self.core_lost}") from error
                    raise
                if feeding is not None:
                    await feeding  # its errors (a chunk that failed to process) fail the step
            finally:
                if feeding is not None and not feeding.done():
                    feeding.cancel()
                step, self.step = self.step, None
                self.microbatch_s += step.seconds
                self.microbatches.append(step.total)
                self.redone_microbatches += step.redone
            scale = grad_scale() if grad_scale is not None else 1.0
            return await self._finish_step(step, stats, max_grad_norm, started, scale, trained, epochs)
        finally:
            self.stepping = False

    @staticmethod
    async def _feed(step: StreamCall, more: AsyncIterator[list[PackedBatch]], trained: list[PackedBatch]) -> None:
        try:
            async for batches in more:
                trained += batches
                step.put(batches)
        finally:
            step.close()

    def train_left_s(self, share_to_come: float = 0.0) -> float | None:
        """The running step's compute still to do, or with none running a whole step's, in seconds of one
        training cell (mean micro-batch seconds so far); None before any micro-batch was timed.
        ``share_to_come``: the share of the running step's batch that has not streamed in yet, counted at
        a whole step's mean compute."""
        step = self.step
        seconds = self.microbatch_s + (step.seconds if step is not None else [])
        if not seconds:
            return None
        mean = sum(seconds) / len(seconds)
        whole = mean * sum(self.microbatches) / len(self.microbatches) if self.microbatches else None
        if step is not None:
            return step.left * mean + share_to_come * (whole if whole is not None else step.total * mean)
        if self.stepping:
            return 0.0  # the optimizer step and weight sync: nothing left for another trainer
        return whole

    def join_s(self) -> float | None:
        """Mean seconds a cell took to switch to training (the weight pull included); None before one did."""
        return self._mean_switch_s("rollout_to_train_s")

    def return_s(self) -> float | None:
        """Mean seconds a cell took to switch back to rollout; None before one did."""
        return self._mean_switch_s("train_to_rollout_s")

    def _mean_switch_s(self, kind: str) -> float | None:
        seconds = [entry["seconds"] for entry in self.switch_log if entry["kind"] == kind]
        return sum(seconds) / len(seconds) if seconds else None

    async def _finish_step(self, step: StreamCall, stats: list[dict[str, float]], max_grad_norm: float | None,
                           started: float, grad_scale: float, batches: list[PackedBatch],
                           epochs: int) -> dict[str, Any]:
        # The lock holds the trainer membership still through the later epochs (switches wait for it).
        async with self._lock:
            satellites = [c for c in self.trainer.ids if c != self.core_id]
            last_stats = stats
            for epoch in range(epochs):
                if epoch:
                    await self._sync_weights(satellites, "epoch")  # trainers only: rollout keeps the step's weights
                    last_stats = await self.trainer.train(batches)
                await self._push_grads(satellites, "reduce")
                result = await self.core.optimizer_step(max_grad_norm, grad_scale)
            # One version per step, however many updates it made (trainer.ppo_epochs): the rollout cells only
            # ever get a step's last weights.
            self.version += 1
            sync_started = time.perf_counter()
            await self._sync_weights()
        metrics = rescale_stats(reduce_stats(stats), grad_scale)
        if epochs > 1:  # how far the last pass had moved from the behaviour policy
            last = reduce_stats(last_stats)
            metrics.update({"last_epoch/clip_fraction": last.get("clip_fraction", 0.0),
                            "last_epoch/ratio_max": last.get("ratio_max", 1.0)})
        metrics.update(grad_norm=result["grad_norm"], version=self.version,
                       fwd_bwd_s=float(sum(step.seconds)),  # the micro-batches' forward+backward, summed over cells
                       train_time_s=time.perf_counter() - started, weight_sync_s=time.perf_counter() - sync_started,
                       trainer_members=len(self.step_members), microbatches=step.total,
                       microbatches_redone=step.redone, cells_lost=len(self.lost), cells_replaced=len(self.replaced))
        for member in sorted(self.step_members | set(step.done_by)):
            metrics[f"microbatches/{member}"] = step.done_by.get(member, 0)
        return metrics

    async def _sync_weights(self, cells: list[str] | None = None, purpose: str = "sync") -> None:
        """Broadcast the core's new weights to ``cells`` (default: every other live cell; engines load them
        between calls)."""
        others = [c for c in (self.ids if cells is None else cells)
                  if c != self.core_id and not self.membership.is_dead(c)]
        if not others:
            return
        transfer = self._transfer(purpose, [self.core_id, *others])
        sending = asyncio.ensure_future(self.core.send_weights(transfer))
        receiving = {c: asyncio.ensure_future(self.cells[c].receive_weights(transfer, self.version)) for c in others}
        pending: set[asyncio.Future] = {sending, *receiving.values()}
        died: list[tuple[str, BaseException]] = []
        while pending and not died:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            died = [(c, task.exception()) for c, task in receiving.items()
                    if task in done and task.exception() is not None and is_process_death(task.exception())]
            for task in done:
                if task.exception() is not None and not died:
                    raise task.exception()
        if not died:
            return
        # A receiver died mid-broadcast: it is lost, and the live cells get the weights again in a group without it.
        # The broken broadcast's calls end in the background (their errors retrieved and dropped); the core's
        # actor runs one transfer at a time, so the new one starts once the broken one has timed out on the dead
        # end (the transfer timeout): the step stalls that long instead of failing the run.
        for task in pending:
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        for cell_id, error in died:
            self.lose(cell_id, error)
        self.epoch += 1
        await self._sync_weights([c for c in others if not self.membership.is_dead(c)], purpose)

    # Checkpoints and teardown -----------------------------------------------------------------------

    async def save(self, path: str) -> None:
        await self.core.save_checkpoint(path, self.version)

    async def load(self, path: str) -> int:
        self.version = await self.core.load_checkpoint(path)
        async with self._lock:
            await self._sync_weights()
        return self.version

    def seconds_in_roles(self) -> dict[str, dict[str, float]]:
        return {cell_id: self.membership.seconds_in_states(cell_id) for cell_id in self.ids}

    async def close(self) -> None:
        self.watch.stop()
        for task in list(self._losing):  # a replacement under way closes its new cell
            task.cancel()
        await asyncio.gather(*self._losing, return_exceptions=True)
        if self.routing is not None:  # a later cluster on the same router (a restart) routes to its own cells
            await self.routing.lose(self.alive(), reason="closed")
        await asyncio.gather(*[cell.close() for cell in self.cells.values()], return_exceptions=True)
