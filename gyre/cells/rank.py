"""One rank of a cell, as a Ray actor: its shard of the training replica and, on rank 0, the rollout engine.

A cell of N ranks holds one training replica sharded over them with FSDP2 (``gyre.replica.sharding``; the
ranks form the cell's own default process group) and serves rollouts from one engine on rank 0. The core's
ranks also hold the optimizer over their shards. Every method here is called on all the cell's ranks at
once (``gyre.cells.cell.Cell``), and declares how (``register``): most go to every rank alike, micro-batches
are split across the ranks.

Weights and gradients move between cells shard to shard (``gyre.replica.transfer``): rank r of each cell
taking part joins the transfer's group of rank r. Weights go in buckets (``gyre.replica.weight_sync``): a
rollout cell gathers each bucket's parts onto rank 0, which streams them into its engine. The methods are
async so the engine serves many calls at once while transfers and training run in worker threads.

Weight versions: the driver owns the policy version (``Cluster.version``) and says which version it sends
or expects; an engine knows the version of the weights it holds (``engine.weight_version``, it stamps every
call with it). A rank keeps no version of its own.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gyre.algo.losses import LossConfig
from gyre.cells.config import CellConfig
from gyre.cells.remote import ServesEngine
from gyre.protocol import PackedBatch
from gyre.replica import weight_sync
from gyre.replica.buckets import bucket_bytes_from_mb
from gyre.replica.sharding import (
    Replica,
    ShardLayout,
    model_param_specs,
    needs_master_weights,
)
from gyre.replica.step import StepConfig
from gyre.replica.transfer import GroupRegistry, Transfer, reduce_sum
from gyre.single_controller import Collect, DispatchMode, register


class CellRank(ServesEngine):
    def __init__(self, cfg: CellConfig, rank: int, store: tuple[str, int], backend: str = "gloo"):
        torch.set_num_threads(cfg.torch_threads)
        self.cfg, self.rank = cfg, rank
        self.loss_cfg, self.step_cfg = LossConfig(**cfg.loss), StepConfig(**cfg.step)
        # A mesh to shard over: the cell's ranks, or this one rank when training keeps float32 master weights.
        self.mesh = self._join_cell(store, backend) if cfg.ranks > 1 or needs_master_weights(cfg.dtype) else None
        self.layout = ShardLayout(model_param_specs(cfg.model_path, cfg.dtype), cfg.ranks)
        self.buckets = self.layout.bucket_plan(bucket_bytes_from_mb(cfg.bucket_mb))
        self.engine = None
        if rank == 0:
            from gyre.rollout import make_engine_from_config

            self.engine = make_engine_from_config(cfg.rollout, model_path=cfg.model_path, engine_id=cfg.cell_id)
        self.groups = GroupRegistry()
        self.replica: Replica | None = None
        self.grad_inbox: torch.Tensor | None = None  # gradients other cells sent the core this step
        if cfg.is_core:
            self.replica = self._build_replica()
            self.replica.make_optimizer(cfg.lr, cfg.weight_decay, cfg.betas)

    def _join_cell(self, store: tuple[str, int], backend: str) -> Any:
        """The cell's ranks as this process's default group, and the device mesh FSDP2 shards over."""
        import datetime

        from torch.distributed.device_mesh import init_device_mesh

        timeout = datetime.timedelta(seconds=300)
        client = dist.TCPStore(store[0], store[1], is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=dist.PrefixStore(f"gyre/cell/{self.cfg.cell_id}", client),
                                rank=self.rank, world_size=self.cfg.ranks, timeout=timeout)
        return init_device_mesh("cuda" if self.cfg.device.startswith("cuda") else "cpu", (self.cfg.ranks,))

    def _build_replica(self) -> Replica:
        return Replica.build(self.cfg.model_path, dtype=self.cfg.dtype, device=self.cfg.device, mesh=self.mesh,
                             reference_path=self.cfg.reference_path, reshard_after_forward=self.cfg.reshard_after_forward)

    @register(DispatchMode.ONE_TO_ALL)
    def ping(self) -> str:
        return f"{self.cfg.cell_id}/{self.rank}"

    async def lifeline(self) -> None:
        """Never returns: Ray fails this call when the process dies (``gyre.cells.lifeline``)."""
        await asyncio.Event().wait()

    # Engine protocol (rank 0), so the router can drive a remote cell like a local engine: ServesEngine's
    # generate / abort / export_session / import_session, and its stats --------------------------------------

    @register(DispatchMode.RANK_ZERO)
    def stats(self) -> dict[str, float]:
        return dict(self.engine.stats())

    # Role switches ----------------------------------------------------------------------------------

    @register(DispatchMode.ONE_TO_ALL, Collect.FIRST)
    async def enter_train(self, weights_from_core: Transfer | None = None) -> float:
        """Sleep the engine and hold a training replica with the core's current weights (pulled shard by
        shard through ``weights_from_core`` unless this is the core)."""
        started = time.perf_counter()
        if self.engine is not None:
            await self.engine.sleep()
        if self.replica is None:
            self.replica = await asyncio.to_thread(self._build_replica)
        if weights_from_core is not None:
            group = self._group(weights_from_core)
            await asyncio.to_thread(weight_sync.receive_into, group, self.replica, self.layout, self.rank,
                                    self.buckets, self.cfg.device)
        self.replica.zero_grad()
        self.replica.move_optimizer(self.cfg.device)
        return time.perf_counter() - started

    @register(DispatchMode.ONE_TO_ALL, Collect.FIRST)
    async def enter_rollout(self, version: int) -> float:
        """Wake the engine with the replica's weights (``version``, the driver's) unless it already holds
        them; satellites drop their training state."""
        started = time.perf_counter()
        if self.engine is not None:
            await self.engine.wake()
        if self.replica is not None and await asyncio.to_thread(self._engine_lacks, version):
            # every rank takes part in each parameter's gather; rank 0's engine reads them one by one
            await self._load_engine(self.replica.iter_full_params(self.layout.dtype), version)
        if self.cfg.is_core:
            self.replica.move_optimizer("cpu")  # host memory while serving
        else:
            self.replica = None
        return time.perf_counter() - started

    def _engine_lacks(self, version: int) -> bool:
        """Whether rank 0's engine holds other weights than ``version`` (rank 0 knows; it tells the others)."""
        lacks = torch.tensor([self.engine is not None and self.engine.weight_version != version], dtype=torch.int32)
        if self.cfg.ranks > 1:
            dist.broadcast(lacks, src=0)
        return bool(lacks.item())

    async def _load_engine(self, named: Iterator[tuple[str, torch.Tensor]], version: int) -> None:
        """Rank 0: stream ``named`` into the engine as ``version``. Other ranks: run the stream to its end
        (they take part in the collectives that produce it)."""
        try:
            if self.engine is not None:
                await self.engine.load_weights(named, version)
        finally:  # whatever the engine did not read (none of it on other ranks, all of it if it failed)
            await asyncio.to_thread(collections.deque, named, 0)

    # Weights ----------------------------------------------------------------------------------------

    def _group(self, transfer: Transfer) -> dist.ProcessGroup:
        return self.groups.group(transfer, self.cfg.cell_id, self.rank)

    def _reduce(self, transfer: Transfer, flat: torch.Tensor) -> torch.Tensor:
        return reduce_sum(self._group(transfer), flat, root=0)

    @register(DispatchMode.ONE_TO_ALL)
    async def send_weights(self, transfer: Transfer) -> None:
        """Root side of a weight transfer: this rank's shard in buckets, each a copy (training may go on)."""
        assert self.replica is not None
        await asyncio.to_thread(weight_sync.send, self._group(transfer), self.replica, self.layout, self.rank,
                                self.buckets)

    @register(DispatchMode.ONE_TO_ALL)
    async def receive_weights(self, transfer: Transfer, version: int) -> None:
        """Take the root's weights (``version``), bucket by bucket: into the training replica if there is one
        (its engine sleeps and is loaded when the cell goes back to rollout), else into rank 0's engine."""
        group = self._group(transfer)
        if self.replica is not None:
            await asyncio.to_thread(weight_sync.receive_into, group, self.replica, self.layout, self.rank,
                                    self.buckets, self.cfg.device)
            return
        stream = weight_sync.receive_whole(group, self.layout, self.rank, self.buckets, self.cfg.device,
                                           weight_sync.gather_on_rank0(self.layout, self.rank))
        await self._load_engine(stream, version)

    # Training ---------------------------------------------------------------------------------------

    @register(DispatchMode.SPLIT)
    async def train(self, batches: list[PackedBatch]) -> list[dict[str, float]]:
        """This rank's part of one round of micro-batches (every rank of the cell runs the round)."""
        if self.replica is None:
            raise RuntimeError(f"cell {self.cfg.cell_id} has no training replica (it is not in the trainer group)")
        return await asyncio.to_thread(self.replica.train, batches, self.loss_cfg, self.step_cfg)

    @register(DispatchMode.ONE_TO_ALL)
    async def push_grads(self, transfer: Transfer) -> None:
        """A satellite's gradients summed into the core's (shard to shard), then dropped here."""
        assert self.replica is not None
        await asyncio.to_thread(self._reduce, transfer, self.replica.flat_grad_shard())
        self.replica.zero_grad()

    @register(DispatchMode.ONE_TO_ALL)
    async def collect_grads(self, transfer: Transfer) -> None:
        """Core: the other cells' gradient sum into the inbox. It sends zeros itself, so its own gradients,
        possibly still accumulating, are never read concurrently."""
        assert self.replica is not None
        zeros = torch.zeros(self.layout.numel(self.rank), dtype=self.replica.grad_dtype, device=self.cfg.device)
        total = await asyncio.to_thread(self._reduce, transfer, zeros)
        self.grad_inbox = total if self.grad_inbox is None else self.grad_inbox + total

    @register(DispatchMode.ONE_TO_ALL, Collect.FIRST)
    async def optimizer_step(self, max_grad_norm: float | None, grad_scale: float = 1.0) -> dict[str, float]:
        """Core: own gradients + inbox, scaled by ``grad_scale``, clipped, step (the driver counts versions)."""
        assert self.cfg.is_core and self.replica is not None
        if self.grad_inbox is not None:
            self.replica.add_flat_grad_shard(self.grad_inbox)
            self.grad_inbox = None
        norm = await asyncio.to_thread(self.replica.step, max_grad_norm, grad_scale)
        return {"grad_norm": norm}

    # Checkpoints (core) -----------------------------------------------------------------------------

    @register(DispatchMode.ONE_TO_ALL)
    async def save_checkpoint(self, folder: str, version: int) -> None:
        """The policy as an HF folder (whole weights gathered on rank 0: servable, evaluable, a new run's
        start) with the whole optimizer state and the weight version beside it (``trainer_state.pt``)."""
        assert self.replica is not None and self.replica.optimizer is not None
        model_state, optimizer_state = await asyncio.to_thread(self.replica.full_state)
        if self.rank == 0:
            from gyre.models import load_tokenizer
            from gyre.replica.checkpoint import save_checkpoint

            state = {"optimizer": optimizer_state, "version": version}
            if needs_master_weights(self.cfg.dtype):  # the HF folder holds the model's dtype; resuming, these
                state["master_weights"] = model_state
            await asyncio.to_thread(save_checkpoint, Path(folder), self.replica.model, load_tokenizer(self.cfg.model_path),
                                    state, state_dict=model_state, dtype=self.cfg.dtype)

    @register(DispatchMode.ONE_TO_ALL, Collect.FIRST)
    async def load_checkpoint(self, folder: str) -> int:
        """Core: the checkpoint's weights and optimizer state, its weights into the engine; returns its version."""
        from gyre.replica.checkpoint import load_trainer_state, read_weights

        assert self.replica is not None and self.replica.optimizer is not None
        state = load_trainer_state(Path(folder))
        model_state = state.get("master_weights") or await asyncio.to_thread(read_weights, Path(folder), self.cfg.dtype)
        await asyncio.to_thread(self.replica.load_full_state, model_state, state["optimizer"])
        version = int(state["version"])
        await self._load_engine(self.replica.iter_full_params(self.layout.dtype), version)
        return version

    @register(DispatchMode.ONE_TO_ALL, Collect.FIRST)
    async def state_dict(self) -> dict[str, torch.Tensor]:
        """The replica's whole state dict (gathered onto rank 0)."""
        assert self.replica is not None
        return {name: t.detach().clone() for name, t in (await asyncio.to_thread(self.replica.full_model_state)).items()}

    @register(DispatchMode.ONE_TO_ALL)
    def resources(self) -> dict[str, int]:
        """Live transfer groups and open file descriptors of this rank's process (leak checks)."""
        return {"live_groups": self.groups.live, "groups_made": self.groups.made, "groups_ended": self.groups.ended,
                "failed_shutdowns": self.groups.failed_shutdowns,
                "open_fds": len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1}

    @register(DispatchMode.ONE_TO_ALL)
    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()
        self.groups.close()
        if dist.is_initialized():
            dist.destroy_process_group()

