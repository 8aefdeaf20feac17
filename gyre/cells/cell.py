"""A cell as the driver holds it: N rank actors (``CellRank``) placed together by a Ray placement group,
called as one worker group. Each method below forwards to the ranks as ``CellRank`` declares it (most to
every rank, micro-batches split across them), and declares in turn how a group of cells calls it: the
trainer group streams micro-batches to its cells, ``stream_width`` at a time (one per rank), every other
call goes to each cell of the group alike.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from gyre.cells.config import CellConfig
from gyre.cells.rank import CellRank
from gyre.protocol import PackedBatch
from gyre.replica.transfer import Transfer
from gyre.single_controller import Collect, DispatchMode, GroupCall, WorkerGroup, register

log = logging.getLogger(__name__)

# A rank blocked in a broken transfer (its peer died) answers nothing until the transfer's timeout (minutes):
# closing waits this long for the ranks to close themselves, then ends their processes regardless.
CLOSE_TIMEOUT_S = 20.0


class Cell:
    def __init__(self, cfg: CellConfig, store: tuple[str, int], *, cpus: float, gpus: float = 0.0,
                 backend: str = "gloo"):
        if cfg.ranks < 1:
            raise ValueError(f"cluster.ranks_per_cell must be >= 1, got {cfg.ranks}")
        self.id, self.is_core, self.stream_width = cfg.cell_id, cfg.is_core, cfg.ranks
        share = {"CPU": cpus / cfg.ranks, **({"GPU": gpus / cfg.ranks} if gpus else {})}
        # Named by the cell and unique: a replacement of a lost cell (or the cells of a restarted run) may be
        # placed while Ray still removes the old group.
        self.placement = placement_group([share] * cfg.ranks, strategy="STRICT_PACK",
                                         name=f"gyre-{cfg.cell_id}-{secrets.token_hex(3)}")
        actor = ray.remote(CellRank)
        actors = [
            actor.options(num_cpus=share["CPU"], num_gpus=share.get("GPU", 0), max_concurrency=64,
                          scheduling_strategy=PlacementGroupSchedulingStrategy(self.placement, rank)).remote(
                cfg, rank, store, backend)
            for rank in range(cfg.ranks)
        ]
        self.ranks = WorkerGroup(f"{cfg.cell_id}/ranks", CellRank, {f"{cfg.cell_id}/{r}": a for r, a in enumerate(actors)})
        self.engine_rank = actors[0]  # serves the router

    def ready(self) -> GroupCall:
        return self.ranks.ping()

    @register(DispatchMode.STREAM)
    def train(self, batches: list[PackedBatch]) -> GroupCall:
        return self.ranks.train(batches)

    @register(DispatchMode.ONE_TO_ALL)
    def enter_train(self, weights_from_core: Transfer | None = None) -> GroupCall:
        return self.ranks.enter_train(weights_from_core)

    @register(DispatchMode.ONE_TO_ALL)
    def enter_rollout(self, version: int) -> GroupCall:
        return self.ranks.enter_rollout(version)

    @register(DispatchMode.ONE_TO_ALL)
    def send_weights(self, transfer: Transfer) -> GroupCall:
        return self.ranks.send_weights(transfer)

    @register(DispatchMode.ONE_TO_ALL)
    def receive_weights(self, transfer: Transfer, version: int) -> GroupCall:
        return self.ranks.receive_weights(transfer, version)

    @register(DispatchMode.ONE_TO_ALL)
    def push_grads(self, transfer: Transfer) -> GroupCall:
        return self.ranks.push_grads(transfer)

    @register(DispatchMode.ONE_TO_ALL)
    def collect_grads(self, transfer: Transfer) -> GroupCall:
        return self.ranks.collect_grads(transfer)

    @register(DispatchMode.RANK_ZERO)
    def optimizer_step(self, max_grad_norm: float | None, grad_scale: float = 1.0) -> GroupCall:
        return self.ranks.optimizer_step(max_grad_norm, grad_scale)

    @register(DispatchMode.RANK_ZERO)
    def save_checkpoint(self, folder: str, version: int) -> GroupCall:
        return self.ranks.save_checkpoint(folder, version)

    @register(DispatchMode.RANK_ZERO)
    def load_checkpoint(self, folder: str) -> GroupCall:
        return self.ranks.load_checkpoint(folder)

    @register(DispatchMode.ONE_TO_ALL, Collect.ALL)
    def state_dict(self) -> GroupCall:
        return self.ranks.state_dict()

    @register(DispatchMode.ONE_TO_ALL)
    def resources(self) -> GroupCall:
        return self.ranks.resources()

    @register(DispatchMode.ONE_TO_ALL)
    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.ranks.close(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("cell %s did not close within %.0f s (a rank blocked in a transfer?); ending its processes",
                        self.id, CLOSE_TIMEOUT_S)
        finally:
            for actor in self.ranks.members:
                ray.kill(actor)
            remove_placement_group(self.placement)


def cells_group(name: str, cells: dict[str, Cell] | list[Cell]) -> WorkerGroup:
    """A worker group over some cells (e.g. the ones a transfer reaches)."""
    members: dict[str, Any] = cells if isinstance(cells, dict) else {cell.id: cell for cell in cells}
    return WorkerGroup(name, Cell, members)
