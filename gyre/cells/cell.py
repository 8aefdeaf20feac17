"""A cell: one engine and (when it trains) one training replica, one of them active at a time.

Runs as a Ray actor (``CellActor``); the methods are async so the engine serves many calls at once while
weight transfers and training run in worker threads. The core cell keeps the authoritative weights and the
only optimizer; satellites hold a replica only while they train. Weights and gradients move between cells
through per-membership process groups (``gyre.trainer.distributed``), never through the driver.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gyre.algo.losses import LossConfig
from gyre.protocol import PackedBatch
from gyre.rollout import make_engine
from gyre.rollout.base import Generation, KVState, SamplingParams
from gyre.trainer import distributed as dist_utils
from gyre.trainer.step import StepConfig, microbatch_backward


@dataclass
class CellConfig:
    cell_id: str
    is_core: bool
    model_path: str = "tiny"
    device: str = "cpu"
    dtype: str = "float32"  # training replica dtype
    engine: dict[str, Any] = field(default_factory=dict)  # HFEngine / VLLMEngine keyword arguments
    engine_kind: str = "hf"
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    loss: dict[str, Any] = field(default_factory=dict)
    step: dict[str, Any] = field(default_factory=dict)
    torch_threads: int = 1


class Cell:
    def __init__(self, cfg: CellConfig):
        torch.set_num_threads(cfg.torch_threads)
        self.cfg = cfg
        self.loss_cfg = LossConfig(**cfg.loss)
        self.step_cfg = StepConfig(**cfg.step)
        self.engine = make_engine(cfg.engine_kind, model_path=cfg.model_path, device=cfg.device,
                                  engine_id=cfg.cell_id, **cfg.engine)
        self.version = 0
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.grad_inbox: torch.Tensor | None = None  # gradients pushed by satellites (core only)
        model = self._build_model()
        # Names and shapes of the parameters, in the order of the flat vectors that move between cells.
        self.template = [(name, p.shape) for name, p in model.named_parameters()]
        self.numel = sum(p.numel() for p in model.parameters())
        if cfg.is_core:
            self.model = model
            self.optimizer = torch.optim.AdamW(
                self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=tuple(cfg.betas)
            )

    def _build_model(self) -> torch.nn.Module:
        from gyre.models import load_model

        model = load_model(self.cfg.model_path, device=self.cfg.device, dtype=self.cfg.dtype)
        model.train()
        return model

    def ping(self) -> str:
        return self.cfg.cell_id

    # Engine protocol, so the router can drive a remote cell like a local engine -----------------------

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        return await self.engine.generate(session_id, prompt_ids, sampling)

    async def abort(self, session_id: str) -> bool:
        return await self.engine.abort(session_id)

    async def export_session(self, session_id: str) -> KVState | None:
        return await self.engine.export_session(session_id)

    async def import_session(self, session_id: str, state: KVState) -> None:
        await self.engine.import_session(session_id, state)

    def stats(self) -> dict[str, float]:
        return {**self.engine.stats(), "version": self.version}

    # Role switches ----------------------------------------------------------------------------------

    async def enter_train(self, weights_from_core: dist_utils.GroupSpec | None = None) -> float:
        """Sleep the engine and get a training replica with the core's current weights."""
        started = time.perf_counter()
        await self.engine.sleep()
        if self.model is None:
            self.model = self._build_model()
        if weights_from_core is not None:
            await asyncio.to_thread(self._broadcast, weights_from_core)
        self.model.zero_grad(set_to_none=True)
        self._move_optimizer(self.cfg.device)
        return time.perf_counter() - started

    async def enter_rollout(self) -> float:
        """Wake the engine with this cell's newest weights; satellites drop their training state."""
        started = time.perf_counter()
        await self.engine.wake()
        if self.model is not None and self.engine.weight_version != self.version:
            await self.engine.load_weights(self._named_params(), self.version)
        if self.cfg.is_core:
            self._move_optimizer("cpu")  # offload optimizer state to host memory while serving
        else:
            self.model = None
        return time.perf_counter() - started

    # Weights ----------------------------------------------------------------------------------------

    def _named_params(self) -> list[tuple[str, torch.Tensor]]:
        assert self.model is not None
        return [(name, p.detach()) for name, p in self.model.named_parameters()]

    def _broadcast(self, spec: dist_utils.GroupSpec) -> None:
        group = dist_utils.make_group(spec)
        dist_utils.broadcast_params(group, self.model, root=0)

    async def send_weights(self, spec: dist_utils.GroupSpec) -> None:
        """Core side of a weight transfer (rank 0)."""
        await asyncio.to_thread(self._broadcast, spec)

    async def receive_weights(self, spec: dist_utils.GroupSpec, version: int) -> None:
        """Take the core's weights: into the training replica if there is one, and into the awake engine."""
        flat = torch.empty(self.numel, device=self.cfg.device)
        group = await asyncio.to_thread(dist_utils.make_group, spec)
        await asyncio.to_thread(dist_utils.broadcast, group, flat, 0)
        self.version = version
        if self.model is not None:
            dist_utils.load_flat_params(self.model, flat)
        if not self.engine_asleep():
            await self.engine.load_weights(self._unflatten(flat), version)

    def _unflatten(self, flat: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
        named, offset = [], 0
        for name, shape in self.template:
            n = shape.numel()
            named.append((name, flat[offset : offset + n].view(shape)))
            offset += n
        return named

    def engine_asleep(self) -> bool:
        return bool(getattr(self.engine, "_asleep", False))

    # Training ---------------------------------------------------------------------------------------

    async def train_microbatch(self, batch: PackedBatch) -> dict[str, float]:
        if self.model is None:
            raise RuntimeError(f"cell {self.cfg.cell_id} has no training replica (it is not in the trainer group)")
        return await asyncio.to_thread(microbatch_backward, self.model, batch, self.loss_cfg, self.step_cfg)

    async def push_grads(self, spec: dist_utils.GroupSpec) -> None:
        """Satellite: add this replica's gradients into the core's inbox (a reduce to rank 0), then zero them."""
        assert self.model is not None
        flat = dist_utils.flat_grads(self.model)
        await asyncio.to_thread(dist_utils.reduce_grads, dist_utils.make_group(spec), flat, 0)
        self.model.zero_grad(set_to_none=True)

    async def collect_grads(self, spec: dist_utils.GroupSpec) -> None:
        """Core: receive the satellites' gradient sum into the inbox (it contributes zeros itself, so its
        own gradients, possibly still accumulating, are never read concurrently)."""
        assert self.model is not None
        zeros = torch.zeros(self.numel, device=self.cfg.device)
        total = await asyncio.to_thread(dist_utils.reduce_grads, dist_utils.make_group(spec), zeros, 0)
        self.grad_inbox = total if self.grad_inbox is None else self.grad_inbox + total

    async def optimizer_step(self, max_grad_norm: float | None) -> dict[str, float]:
        """Core: own gradients + inbox, clip, step; the weight version increments."""
        assert self.cfg.is_core and self.model is not None and self.optimizer is not None
        own = dist_utils.flat_grads(self.model)
        dist_utils.set_flat_grads(self.model, own if self.grad_inbox is None else own + self.grad_inbox)
        self.grad_inbox = None
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_grad_norm or float("inf"))
        self.optimizer.step()
        self.model.zero_grad(set_to_none=True)
        self.version += 1
        return {"grad_norm": float(norm), "version": self.version}

    def _move_optimizer(self, device: str) -> None:
        if self.optimizer is None:
            return
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if torch.is_tensor(value) and key != "step":
                    state[key] = value.to(device)

    # Checkpoints (core) -----------------------------------------------------------------------------

    def save_checkpoint(self, folder: str) -> None:
        """The policy as an HF folder (model + tokenizer: servable, evaluable, a new run's start) with the
        optimizer and weight version beside it (``trainer_state.pt``) for resuming."""
        from gyre.models import load_tokenizer
        from gyre.trainer.checkpoint import save_checkpoint

        assert self.model is not None and self.optimizer is not None
        state = {"optimizer": self.optimizer.state_dict(), "version": self.version}
        save_checkpoint(Path(folder), self.model, load_tokenizer(self.cfg.model_path), state)

    async def load_checkpoint(self, folder: str) -> int:
        from gyre.trainer.checkpoint import load_trainer_state, load_weights_into

        assert self.model is not None and self.optimizer is not None
        state = load_trainer_state(Path(folder))
        load_weights_into(self.model, Path(folder))
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = int(state["version"])
        await self.engine.load_weights(self._named_params(), self.version)
        return self.version

    def state_dict(self) -> dict[str, torch.Tensor]:
        assert self.model is not None
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    async def close(self) -> None:
        await self.engine.close()
