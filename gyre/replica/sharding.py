"""One rank's part of a training replica: the whole model on a cell of one rank, an FSDP2 shard of it on a
cell of N ranks; and the flat shards that move between replicas in the model's dtype.

On N > 1 ranks the model is ``fully_shard``-ed over the cell's ranks (its default process group: gloo on
CPU, NCCL on GPU). The ranks train different micro-batches, in rounds: at a round's start every rank
all-gathers the parameters (``unshard``); each then trains its own micro-batch, or none, with resharding
and gradient sync off, so no collective runs while it computes (a long tree's chunked backward makes any
number of passes); then every rank runs one empty backward with sync on, which reduce-scatters the round's
gradients, summed, into the shards. Every rank makes the same collectives in the same order whatever it
trained, so ranks never wait on one another's work. Between rounds parameters, gradients and the core's
optimizer state stay sharded; during a round each rank holds the full parameters and its gradients.

A rank's shard of a parameter is the row range FSDP2 gives it (``torch.chunk`` along dim 0);
``ShardLayout`` computes it from shapes alone, so a rollout cell with no replica still knows which rows
each of its ranks receives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from gyre.algo.losses import LossConfig
from gyre.protocol import PackedBatch
from gyre.replica.buckets import plan_buckets
from gyre.replica.step import StepConfig, microbatch_backward


@dataclass(frozen=True)
class ParamSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


def param_specs(model: torch.nn.Module) -> list[ParamSpec]:
    """Names, full shapes and dtypes of ``model``'s parameters, in the order flat shards hold them."""
    return [ParamSpec(name, tuple(p.shape), p.dtype) for name, p in model.named_parameters()]


def model_param_specs(model_path: str, dtype: str) -> list[ParamSpec]:
    """The specs of the model at ``model_path`` without allocating it (built on the meta device)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from gyre.models import resolve_model_path

    config = AutoConfig.from_pretrained(resolve_model_path(model_path), local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return param_specs(model)


class ShardLayout:
    """Which rows of every parameter each of ``ranks`` ranks holds, and flat shards cut and joined by it."""

    def __init__(self, specs: list[ParamSpec], ranks: int):
        dtypes = {spec.dtype for spec in specs}
        if len(dtypes) != 1:
            raise ValueError(f"a replica's parameters must share one dtype to move as flat shards, got {dtypes}")
        self.specs, self.ranks = specs, ranks
        self.dtype = dtypes.pop()

    def rows(self, spec: ParamSpec, rank: int) -> tuple[int, int]:
        total = spec.shape[0] if spec.shape else 1
        step = -(-total // self.ranks)  # torch.chunk's chunk size; trailing ranks may get no rows
        return min(rank * step, total), min((rank + 1) * step, total)

    def piece_shape(self, spec: ParamSpec, rank: int) -> tuple[int, ...]:
        if not spec.shape:
            return () if rank == 0 else (0,)
        start, stop = self.rows(spec, rank)
        return (stop - start, *spec.shape[1:])

    def numel(self, rank: int) -> int:
        return sum(_numel(self.piece_shape(spec, rank)) for spec in self.specs)

    def split(self, flat: torch.Tensor, rank: int) -> list[torch.Tensor]:
        """``flat`` (rank ``rank``'s shard) as one piece per parameter, shaped."""
        pieces, offset = [], 0
        for spec in self.specs:
            shape = self.piece_shape(spec, rank)
            n = _numel(shape)
            pieces.append(flat[offset: offset + n].view(shape))
            offset += n
        return pieces

    def assemble(self, flats: list[torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
        """Full parameters from every rank's flat shard (index = rank)."""
        return self.assemble_bucket(flats, range(len(self.specs)))

    # Buckets: ranges of parameters that move together (gyre.replica.buckets), the same on every rank and
    # every cell because they are cut from the full sizes.

    def bucket_plan(self, bucket_bytes: int) -> list[range]:
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return plan_buckets([_numel(spec.shape) * itemsize for spec in self.specs], bucket_bytes)

    def bucket_numel(self, bucket: range, rank: int) -> int:
        """Elements of rank ``rank``'s part of ``bucket``."""
        return sum(_numel(self.piece_shape(self.specs[i], rank)) for i in bucket)

    def split_bucket(self, flat: torch.Tensor, bucket: range, rank: int) -> list[torch.Tensor]:
        """Rank ``rank``'s part of ``bucket`` (flat) as one shaped piece per parameter (views)."""
        pieces, offset = [], 0
        for i in bucket:
            shape = self.piece_shape(self.specs[i], rank)
            pieces.append(flat[offset: offset + _numel(shape)].view(shape))
            offset += _numel(shape)
        return pieces

    def assemble_bucket(self, flats: list[torch.Tensor], bucket: range) -> list[tuple[str, torch.Tensor]]:
        """The whole parameters of ``bucket`` from every rank's part of it (index = rank; padding allowed)."""
        split = [self.split_bucket(flat[: self.bucket_numel(bucket, rank)], bucket, rank) for rank, flat in enumerate(flats)]
        full = []
        for position, index in enumerate(bucket):
            spec = self.specs[index]
            pieces = [split[rank][position] for rank in range(self.ranks)]
            full.append((spec.name, pieces[0] if not spec.shape else torch.cat(pieces, dim=0)))
        return full


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a (possibly sharded) tensor."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor (a collective over the cell's ranks when it is sharded)."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


class Replica:
    """This rank's part of one training replica (the policy, and with ``algo.kl_coef > 0`` a frozen
    reference model sharded the same way), and the optimizer over it on the core."""

    def __init__(self, model: torch.nn.Module, mesh: Any | None = None, reference: torch.nn.Module | None = None):
        self.model, self.mesh, self.reference = model, mesh, reference
        # The parameters as this rank holds them between rounds (its shards). During a round FSDP2 registers
        # unsharded ones on the module; transfers and the optimizer always use these.
        self.params: list[torch.nn.Parameter] = list(model.parameters())
        self.optimizer: torch.optim.Optimizer | None = None

    @classmethod
    def build(cls, model_path: str, *, dtype: str, device: str, mesh: Any | None, reference_path: str | None) -> Replica:
        from gyre.models import load_model

        model = load_model(model_path, dtype=dtype, device=device)
        model.train()
        reference = None
        if reference_path is not None:
            reference = load_model(reference_path, dtype=dtype, device=device)
            reference.eval().requires_grad_(False)
        if mesh is not None:
            _shard(model, mesh)
            if reference is not None:
                _shard(reference, mesh)
        return cls(model, mesh, reference)

    @property
    def sharded(self) -> bool:
        return self.mesh is not None

    def make_optimizer(self, lr: float, weight_decay: float, betas: tuple[float, float]) -> None:
        self.optimizer = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay, betas=tuple(betas))

    def move_optimizer(self, device: str) -> None:
        """Optimizer state to ``device`` (host memory while the core serves rollouts on a GPU)."""
        for state in (self.optimizer.state.values() if self.optimizer is not None else ()):
            for key, value in state.items():
                if torch.is_tensor(value) and key != "step":
                    state[key] = value.to(device)

    # Training -------------------------------------------------------------------------------------------

    def train(self, batches: list[PackedBatch], loss_cfg: LossConfig, step_cfg: StepConfig) -> list[dict[str, float]]:
        """One round: this rank's micro-batches (on a sharded replica at most one; every rank of the cell
        runs the round together, with or without one). Gradients accumulate."""
        if not self.sharded:
            return [microbatch_backward(self.model, b, loss_cfg, step_cfg, ref_model=self.reference) for b in batches]
        models = [m for m in (self.model, self.reference) if m is not None]
        for model in models:
            model.unshard()
        self.model.set_requires_gradient_sync(False)
        self.model.set_reshard_after_backward(False)
        stats = [microbatch_backward(self.model, b, loss_cfg, step_cfg, ref_model=self.reference) for b in batches]
        self.model.set_requires_gradient_sync(True)
        self.model.set_reshard_after_backward(True)
        self._sync_gradients()
        if self.reference is not None:
            self.reference.reshard()
        return stats

    def _sync_gradients(self) -> None:
        """An empty backward on every rank: FSDP2 reduce-scatters (sums) the unsharded gradients into the
        shards and reshards the parameters. Its own gradient is exactly zero."""
        device = next(iter(self.params)).device
        logits = self.model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=device)).logits
        (logits.sum() * 0.0).backward()

    def zero_grad(self) -> None:
        self.model.zero_grad(set_to_none=True)

    def step(self, max_grad_norm: float | None, grad_scale: float = 1.0) -> float:
        """Scale the gradients by ``grad_scale`` (a streamed step's final normalisation), clip (the norm over
        every shard) and step the optimizer; returns the gradient norm (after scaling, before clipping)."""
        assert self.optimizer is not None
        for p in self.params:
            if p.grad is None:  # a rank or cell that trained nothing this step
                p.grad = torch.zeros_like(p)
            elif grad_scale != 1.0:
                p.grad.mul_(grad_scale)
        norm = torch.nn.utils.clip_grad_norm_(self.params, max_grad_norm if max_grad_norm is not None else float("inf"))
        self.optimizer.step()
        self.zero_grad()
        return float(full(norm))

    # Flat shards ----------------------------------------------------------------------------------------

    def flat_shard(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """This rank's parameters as one flat tensor (in ``dtype``, default theirs): a copy, so the core can
        keep training on its parameters while a joining satellite pulls them."""
        return self.bucket_shard(range(len(self.params)), dtype)

    def load_flat_shard(self, flat: torch.Tensor) -> None:
        """Copy ``flat`` into this rank's parameters in place (an optimizer keeps pointing at them)."""
        self.load_bucket_shard(range(len(self.params)), flat)

    def bucket_shard(self, bucket: range, dtype: torch.dtype | None = None) -> torch.Tensor:
        """This rank's part of the parameters in ``bucket``, flat, as a copy in ``dtype`` (the model's dtype
        on the wire when the parameters are float32 master weights)."""
        return torch.cat([local(self.params[i]).detach().reshape(-1).to(dtype or self.params[i].dtype) for i in bucket])

    def load_bucket_shard(self, bucket: range, flat: torch.Tensor) -> None:
        """Copy ``flat`` (this rank's part of ``bucket``) into the parameters in place."""
        offset = 0
        with torch.no_grad():
            for i in bucket:
                mine = local(self.params[i])
                mine.copy_(flat[offset: offset + mine.numel()].view(mine.shape))
                offset += mine.numel()

    def flat_grad_shard(self) -> torch.Tensor:
        """This rank's gradients as one flat tensor (zeros where a parameter has none)."""
        return torch.cat([
            (local(p.grad) if p.grad is not None else torch.zeros_like(local(p))).reshape(-1) for p in self.params
        ]).detach()

    def add_flat_grad_shard(self, flat: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            mine = local(p.grad)
            mine.add_(flat[offset: offset + mine.numel()].view_as(mine))
            offset += mine.numel()

    # Whole weights (collectives over the cell's ranks when sharded) ----------------------------------------

    def full_params(self) -> list[tuple[str, torch.Tensor]]:
        """Every parameter whole, by name (a collective over the cell's ranks when sharded)."""
        return list(self.iter_full_params())

    def iter_full_params(self, dtype: torch.dtype | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """Every parameter whole, by name, one at a time (in ``dtype``, default theirs): each a collective
        over the cell's ranks when sharded, so every rank must run the stream to its end."""
        names = [name for name, _ in self.model.named_parameters()]
        for name, p in zip(names, self.params):
            yield name, full(p.detach()).to(dtype or p.dtype)

    def full_model_state(self) -> dict[str, torch.Tensor]:
        """The model's state dict, whole (tied weights under every name; on rank 0 when sharded)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=self.sharded)
        return get_model_state_dict(self.model, options=options)

    def full_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """(model state dict, optimizer state dict), whole, keyed by parameter names: the same on any number
        of ranks, so a checkpoint resumes on cells of another size."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=self.sharded)
        return get_state_dict(self.model, self.optimizer, options=options)

    def load_full_state(self, model_state: dict[str, torch.Tensor], optimizer_state: dict[str, Any]) -> None:
        """Load whole states (every rank passes them whole; each keeps its shard)."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_state_dict,
        )

        saved = optimizer_state.get("state", {})
        if not self.sharded and saved and all(isinstance(key, int) for key in saved):
            # A checkpoint written before optimizer states were keyed by parameter name.
            self.model.load_state_dict(model_state)
            self.optimizer.load_state_dict(optimizer_state)
            return
        set_state_dict(self.model, self.optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state,
                       options=StateDictOptions(full_state_dict=True))


def _shard(model: torch.nn.Module, mesh: Any) -> None:
    from torch.distributed.fsdp import fully_shard

    # One FSDP unit: a round all-gathers once and reduce-scatters once. Summed, not averaged: the loss of a
    # step is a sum over its micro-batches, whichever rank trained each. Gloo has no pre-scaled sum.
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    model.set_gradient_divide_factor(1.0)
    model.set_force_sum_reduction_for_comms(True)
