"""One training step over packed micro-batches of trajectory trees.

Micro-batches are independent: each one's loss is a plain sum over its edges (the edge weights already
carry the two-level average over the whole step), so gradients from any split of the step's trees across
micro-batches and trainer replicas simply add up. That is what lets streaming training hand micro-batches
to whichever replica is free. A batch marked with ``chunk_tokens`` (a tree longer than a micro-batch) is
trained in chunks by ``gyre.ops.chunked`` with the same loss and gradients, on the one replica it went to.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch

from gyre.algo.losses import LossConfig, tree_policy_loss
from gyre.ops.chunked import EdgeLoss, chunked_tree_backward, chunked_tree_logprobs
from gyre.ops.forward import tree_logprobs
from gyre.ops.tree_attention import DEFAULT_BLOCK_SIZE
from gyre.protocol import PackedBatch


@dataclass
class StepConfig:
    attention_backend: str = "auto"
    attention_block_size: int = DEFAULT_BLOCK_SIZE  # longest chain block of the block backend
    max_grad_norm: float | None = 1.0


def is_chunked(batch: PackedBatch) -> bool:
    return batch.chunk_tokens is not None and batch.num_tokens > batch.chunk_tokens


def batch_logprobs(
    model: torch.nn.Module, batch: PackedBatch, tensors: dict[str, Any], loss_cfg: LossConfig, step_cfg: StepConfig,
    *, with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and entropies) at every edge of ``batch``, in one pass or chunk by chunk."""
    options = {"temperature": loss_cfg.temperature, "backend": step_cfg.attention_backend,
               "block_size": step_cfg.attention_block_size, "with_entropy": with_entropy}
    if is_chunked(batch):
        return chunked_tree_logprobs(model, tensors, int(batch.chunk_tokens), **options)  # type: ignore[arg-type]
    return tree_logprobs(model, tensors, **options)


def microbatch_backward(
    model: torch.nn.Module,
    batch: PackedBatch,
    loss_cfg: LossConfig,
    step_cfg: StepConfig,
    *,
    proximal_logp: torch.Tensor | None = None,
    ref_model: torch.nn.Module | None = None,
) -> dict[str, float]:
    """Forward + backward of one micro-batch (a chunked one: all its chunks); gradients accumulate into
    ``model``'s parameters."""
    device = next(model.parameters()).device
    tensors = batch.to_torch(device)
    ref_logp = None
    if loss_cfg.kl_coef:
        if ref_model is None:
            raise ValueError("algo.kl_coef > 0 needs a reference model")
        with torch.no_grad():
            ref_logp, _ = batch_logprobs(ref_model, batch, tensors, loss_cfg, step_cfg)

    def edge_loss(edges: torch.Tensor | None, logp: torch.Tensor, entropy: torch.Tensor | None):
        """The loss of some edges (None: all of them) given their log-probs."""
        def pick(values: torch.Tensor | None) -> torch.Tensor | None:
            return values if values is None or edges is None else values[edges]

        proximal = pick(proximal_logp)
        if proximal is None and loss_cfg.proximal == "recompute":
            # One update per batch: before it, the proximal policy is the model itself, so its log-probs are
            # exactly this forward's, detached (no second pass needed; any trainer replica can do it).
            proximal = logp.detach()
        loss, stats = tree_policy_loss(
            logp, pick(tensors["behavior_logprob"]), pick(tensors["w_plus"]), pick(tensors["w_minus"]),
            pick(tensors["w_tok"]), loss_cfg, proximal_logp=proximal, ref_logp=pick(ref_logp), entropy=entropy,
        )
        stats["loss"] = float(loss.detach())
        return loss, stats

    stats = backward_edges(model, batch, tensors, edge_loss, step_cfg, temperature=loss_cfg.temperature,
                           with_entropy=bool(loss_cfg.entropy_coef))
    stats["tree_tokens"] = float(batch.num_tokens)
    stats["path_tokens"] = float(batch.path_tokens)
    stats["policy_tokens"] = float(batch.edge_target.shape[0])
    return stats


def backward_edges(
    model: torch.nn.Module,
    batch: PackedBatch,
    tensors: dict[str, Any],
    edge_loss: EdgeLoss,
    step_cfg: StepConfig,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> dict[str, float]:
    """Forward + backward of any loss that is a sum over ``batch``'s edges (RL or SFT): one pass, or chunk by
    chunk when the batch is marked ``chunk_tokens``, with the same result. ``edge_loss(edges, logp,
    entropy)`` gets the indices of the edges it scores (None: all of them) and returns (loss, statistics);
    the statistics are summed over chunks (``ratio_max``: the maximum)."""
    if is_chunked(batch):
        per_chunk, report = chunked_tree_backward(
            model, tensors, int(batch.chunk_tokens), edge_loss, temperature=temperature,  # type: ignore[arg-type]
            backend=step_cfg.attention_backend, block_size=step_cfg.attention_block_size, with_entropy=with_entropy,
        )
        if not per_chunk:  # no generated token in any chunk: the empty loss's statistics, as one pass gives them
            dtype = next(model.parameters()).dtype
            empty = torch.zeros(0, dtype=dtype, device=tensors["behavior_logprob"].device)
            per_chunk = [edge_loss(torch.zeros(0, dtype=torch.long, device=empty.device), empty,
                                   empty if with_entropy else None)[1]]
        stats = merge_stats(per_chunk)
        stats["chunks"] = float(report.chunks)
        stats["chunk_recomputed_tokens"] = float(report.recomputed_tokens)
        return stats
    logp, entropy = tree_logprobs(
        model, tensors, temperature=temperature, backend=step_cfg.attention_backend,
        block_size=step_cfg.attention_block_size, with_entropy=with_entropy,
    )
    loss, stats = edge_loss(None, logp, entropy)
    loss.backward()
    return stats


def merge_stats(parts: list[dict[str, float]]) -> dict[str, float]:
    """Statistics of a batch from those of its chunks: sums, except ``ratio_max`` (a maximum)."""
    total: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = max(total[key], value) if key == "ratio_max" and key in total else total.get(key, 0.0) + value
    return total


@torch.no_grad()
def proximal_logprobs(model: torch.nn.Module, batches: list[PackedBatch], loss_cfg: LossConfig, step_cfg: StepConfig):
    """The current policy's log-probs at every edge, without gradients (e.g. to give a trainer that runs
    several updates per batch a fixed proximal policy)."""
    device = next(model.parameters()).device
    return [batch_logprobs(model, batch, batch.to_torch(device), loss_cfg, step_cfg)[0] for batch in batches]


WEIGHTED_STATS = ("loss", "pg_loss", "kl", "entropy", "clipped_weight", "weight")  # linear in the loss weights


def rescale_stats(stats: dict[str, float], scale: float) -> dict[str, float]:
    """The statistics of the same micro-batches had their loss weights been ``scale`` times larger."""
    return {key: value * scale if key in WEIGHTED_STATS else value for key, value in stats.items()}


def reduce_stats(per_batch: list[dict[str, float]]) -> dict[str, float]:
    """Sum the additive statistics of micro-batches and derive the step's ratios."""
    total: dict[str, float] = defaultdict(float)
    for stats in per_batch:
        for key, value in stats.items():
            if key == "ratio_max":
                total[key] = max(total[key], value)
            else:
                total[key] += value
    out = dict(total)
    if out.get("path_tokens"):
        out["tree_token_ratio"] = out["tree_tokens"] / out["path_tokens"]
    if out.get("weight"):
        out["clip_fraction"] = out["clipped_weight"] / out["weight"]
    return out


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: list[PackedBatch],
    loss_cfg: LossConfig,
    step_cfg: StepConfig | None = None,
    *,
    ref_model: torch.nn.Module | None = None,
) -> dict[str, Any]:
    """Accumulate every micro-batch's gradient, clip, step the optimizer; returns the step's metrics."""
    step_cfg = step_cfg or StepConfig()
    started = time.perf_counter()
    model.train()
    optimizer.zero_grad(set_to_none=True)
    # With algo.proximal=recompute each micro-batch takes its proximal log-probs from its own forward (the
    # weights do not change until the optimizer steps), so no separate pass is needed.
    per_batch = [microbatch_backward(model, batch, loss_cfg, step_cfg, ref_model=ref_model) for batch in batches]
    max_norm = step_cfg.max_grad_norm if step_cfg.max_grad_norm is not None else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    metrics = reduce_stats(per_batch)
    metrics["grad_norm"] = float(grad_norm)
    metrics["step_time_s"] = time.perf_counter() - started
    metrics["microbatches"] = len(batches)
    return metrics
