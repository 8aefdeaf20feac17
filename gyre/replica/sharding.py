"""One rank's part of a training replica: the whole model on a cell of one rank, an FSDP2 shard of it on a
cell of N ranks; and the shards that move between replicas, in the model's dtype.

Sharding: ``fully_shard`` over the cell's ranks (its default process group: gloo on CPU, NCCL on GPU), one
FSDP2 unit per decoder layer and one for the rest (embeddings, final norm, LM head), so parameters are
gathered and gradients reduce-scattered a layer at a time. The ranks train different micro-batches, in
rounds (each rank at most one), in one of two ways:

- gathered (``reshard_after_forward=False``, the default): at the round's start every rank all-gathers
  every unit; each then trains its own micro-batch, or none, with resharding and gradient sync off, so no
  collective runs while it computes (a long tree's chunked backward makes any number of passes); then one
  empty backward with sync on reduce-scatters the round's gradients, summed, into the shards. During a
  round each rank holds the whole parameters and its gradients.
- layer by layer (``reshard_after_forward=True``): each unit is gathered for its forward and again for its
  backward and freed after each, and its gradients are reduce-scattered as its backward ends: a rank
  holds one layer's whole parameters at a time, not the model's. The ranks then run the same passes: a
  rank with no micro-batch runs a one-token filler with zero loss weight. A round in which any rank has a
  chunked micro-batch (a tree longer than a micro-batch, trained in passes no other rank can predict) is
  run gathered instead; the ranks agree on that with one all-reduce at the round's start.

Every rank makes the same collectives in the same order whatever it trained, so ranks never wait on one
another's work. Between rounds parameters, gradients and the core's optimizer state stay sharded.

Mixed precision (``dtype`` bfloat16 or float16): the parameters (the shards: master weights), their
gradients and the optimizer state are float32, and FSDP2 computes in the low dtype (a
``MixedPrecisionPolicy``: parameters gathered in it, gradients reduced in float32). A cell of one rank
shards the same way over a one-rank mesh. What leaves the replica (weight syncs, checkpoints, engine
loads) is in the model's dtype, not the float32 master copy.

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

    def buffer(self, plan: list[range], rank: int, device: str | torch.device = "cpu") -> torch.Tensor:
        """One flat buffer that holds rank ``rank``'s part of the largest bucket of ``plan``."""
        return torch.empty(max(self.bucket_numel(b, rank) for b in plan), dtype=self.dtype, device=device)

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
        return list(self.iter_assembled(flats, bucket))

    def iter_assembled(self, flats: list[torch.Tensor], bucket: range) -> Iterator[tuple[str, torch.Tensor]]:
        """``assemble_bucket`` one parameter at a time: each whole parameter is made (joined from the ranks'
        pieces) only when it is asked for; with one rank it is a view into ``flats[0]``."""
        split = [self.split_bucket(flat[: self.bucket_numel(bucket, rank)], bucket, rank) for rank, flat in enumerate(flats)]
        for position, index in enumerate(bucket):
            spec = self.specs[index]
            pieces = [split[rank][position] for rank in range(self.ranks)]
            yield spec.name, pieces[0] if self.ranks == 1 or not spec.shape else torch.cat(pieces, dim=0)


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

    def __init__(self, model: torch.nn.Module, mesh: Any | None = None, reference: torch.nn.Module | None = None,
                 *, reshard_after_forward: bool = False):
        self.model, self.mesh, self.reference = model, mesh, reference
        self.reshard_after_forward = reshard_after_forward
        self.rounds = {"gathered": 0, "layer_by_layer": 0}  # rounds trained each way (sharded replicas)
        # The parameters as this rank holds them between rounds (its shards). During a round FSDP2 registers
        # unsharded ones on the module; transfers and the optimizer always use these.
        self.params: list[torch.nn.Parameter] = list(model.parameters())
        self.optimizer: torch.optim.Optimizer | None = None

    @classmethod
    def build(cls, model_path: str, *, dtype: str, device: str, mesh: Any | None, reference_path: str | None,
              reshard_after_forward: bool = False) -> Replica:
        """The replica of ``model_path`` computing in ``dtype``: float32 unsharded (``mesh`` None) or sharded;
        bfloat16/float16 always sharded (``mesh`` required, a one-rank one for a one-rank cell), with float32
        master weights."""
        from gyre.models import load_model

        mixed = needs_master_weights(dtype)
        if mixed and mesh is None:
            raise ValueError(f"model.dtype={dtype} trains on float32 master weights through FSDP2: the replica "
                             "needs a device mesh (a cell makes a one-rank one)")
        master = "float32" if mixed else dtype
        model = load_model(model_path, dtype=master, device=device)
        model.train()
        reference = None
        if reference_path is not None:
            reference = load_model(reference_path, dtype=master, device=device)
            reference.eval().requires_grad_(False)
        if mesh is not None:
            compute = getattr(torch, dtype)
            _shard(model, mesh, compute, reshard_after_forward)
            if reference is not None:
                _shard(reference, mesh, compute, reshard_after_forward)
        return cls(model, mesh, reference, reshard_after_forward=reshard_after_forward)

    @property
    def sharded(self) -> bool:
        return self.mesh is not None

    @property
    def grad_dtype(self) -> torch.dtype:
        """The dtype of the gradients (of the master weights) that move between cells."""
        return self.params[0].dtype

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
        if self.reshard_after_forward and not self._any_rank_chunked(batches):
            return self._train_layer_by_layer(batches, loss_cfg, step_cfg)
        return self._train_gathered(batches, loss_cfg, step_cfg)

    def _train_gathered(self, batches: list[PackedBatch], loss_cfg: LossConfig, step_cfg: StepConfig) -> list[dict[str, float]]:
        models = [m for m in (self.model, self.reference) if m is not None]
        for model in models:
            for unit in _units(model):
                unit.unshard()
            model.set_reshard_after_forward(False)
        self.model.set_requires_gradient_sync(False)
        self.model.set_reshard_after_backward(False)
        stats = [microbatch_backward(self.model, b, loss_cfg, step_cfg, ref_model=self.reference) for b in batches]
        self.model.set_requires_gradient_sync(True)
        self.model.set_reshard_after_backward(True)
        self._sync_gradients()
        for model in models:
            for unit in _units(model):
                unit.reshard()
            model.set_reshard_after_forward(self.reshard_after_forward)
        self.rounds["gathered"] += 1
        return stats

    def _train_layer_by_layer(self, batches: list[PackedBatch], loss_cfg: LossConfig, step_cfg: StepConfig) -> list[dict[str, float]]:
        """Every rank one forward and one backward (its micro-batch or the filler) in lockstep: FSDP2 gathers
        each unit when its pass reaches it, frees it after, and reduce-scatters its gradients."""
        if len(batches) > 1:
            raise ValueError(f"a sharded replica trains at most one micro-batch per round, got {len(batches)}")
        work = batches[0] if batches else filler_batch()
        stats = microbatch_backward(self.model, work, loss_cfg, step_cfg, ref_model=self.reference)
        self.rounds["layer_by_layer"] += 1
        return [stats] if batches else []

    def _any_rank_chunked(self, batches: list[PackedBatch]) -> bool:
        import torch.distributed as dist

        from gyre.replica.step import is_chunked

        flag = torch.tensor([int(any(is_chunked(b) for b in batches))], device=self.params[0].device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.mesh.get_group())
        return bool(flag.item())

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
        numel = sum(local(self.params[i]).numel() for i in bucket)
        out = torch.empty(numel, dtype=dtype or self.params[bucket[0]].dtype, device=self.params[bucket[0]].device)
        return self.bucket_shard_into(bucket, out)

    def bucket_shard_into(self, bucket: range, out: torch.Tensor) -> torch.Tensor:
        """``bucket_shard`` written into ``out`` (cast to its dtype piece by piece: no temporary copies)."""
        offset = 0
        with torch.no_grad():
            for i in bucket:
                mine = local(self.params[i]).detach()
                out[offset: offset + mine.numel()].copy_(mine.reshape(-1))
                offset += mine.numel()
        return out

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
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

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


def needs_master_weights(dtype: str) -> bool:
    """Whether training in ``dtype`` keeps float32 master weights (any dtype below float32)."""
    return str(dtype) in ("bfloat16", "float16")


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (``model.model.layers`` and the like)."""
    for path in ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers", "model.language_model.layers"):
        module: Any = model
        for name in path.split("."):
            module = getattr(module, name, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList) and len(module):
            return list(module)
    raise ValueError(f"{type(model).__name__}: no decoder layer list found (looked for model.layers and the like)")


def _shard(model: torch.nn.Module, mesh: Any, compute: torch.dtype, reshard_after_forward: bool) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32) if compute != torch.float32 else MixedPrecisionPolicy()
    # A unit per decoder layer, then the root (embeddings, final norm, the tied LM head).
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)
    # Summed, not averaged: the loss of a step is a sum over its micro-batches, whichever rank trained each.
    # Gloo has no pre-scaled sum.
    for unit in _units(model):
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)


def _units(model: torch.nn.Module) -> list[Any]:
    """The FSDP2 units of a sharded model, root first (the same order on every rank)."""
    from torch.distributed.fsdp import FSDPModule

    return [module for module in model.modules() if isinstance(module, FSDPModule)]


def filler_batch() -> PackedBatch:
    """Two tokens and one edge of zero loss weight: the pass a rank with no micro-batch makes in a lockstep
    round, so it takes part in every gather (its gradient is exactly zero)."""
    import numpy as np

    zero = np.zeros(1)
    return PackedBatch(
        execution_ids=["filler"], ids=np.array([1, 2]), depth=np.array([0, 1]), subtree_end=np.array([2, 2]),
        is_policy=np.array([False, True]), behavior_logprob=np.zeros(2), weight_version=np.zeros(2, dtype=np.int64),
        tree_ptr=np.array([0, 2]), edge_row=np.array([0]), edge_label=np.array([2]), edge_target=np.array([1]),
        w_plus=zero, w_minus=zero, w_tok=zero, path_tokens=2, chunk_tokens=None,
    )
