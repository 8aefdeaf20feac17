"""A packed tree longer than a micro-batch, trained in chunks with exactly the whole tree's loss and gradients.

The rows are cut in preorder into chunks of at most ``chunk_tokens``. In preorder a row's keys are seen only
by rows of its own subtree, i.e. by later rows; so what chunk ``[s, e)`` attends to outside itself is the
ancestors of row ``s``: the live root-to-leaf path. Those rows' per-layer keys/values sit on a stack
(``PathKV``) together with the gradients later rows have sent them.

For each chunk, in order:

1. Forward with gradients: the chunk's rows against the stacked path keys/values (autograd leaves) and
   themselves; logits for the chunk's edges only; the chunk's share of the loss (the loss is a sum over
   edges, so it splits by the row that predicts). ``backward`` puts the parameter gradients in place and
   the path rows' key/value gradients on the leaves, which the stack accumulates.
2. Rows of the stack whose subtree ended inside the chunk are now final: every row that attends to them
   has sent its gradient. They are recomputed, deepest first, in pieces of at most ``chunk_tokens`` rows
   against their own ancestors, and ``torch.autograd.backward`` runs from their keys/values with the
   accumulated gradients; their ancestors' gradients accumulate in turn, and they leave the stack.
3. The chunk's rows whose subtree goes on past the chunk (its part of the live path) join the stack.

By linearity of backpropagation, step 1 (every effect of a row inside its own chunk) plus step 2 (every
effect of its keys/values on later chunks, carried back through a recomputation of the row) is the whole
tree's gradient. Memory is one chunk's activations plus the live path's keys/values and their gradients:
a finished subtree leaves the stack at once. Compute is one forward+backward per row, plus one more for a
row that was on the path at a chunk boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gyre.ops.forward import gather_logprobs, use_tree_attention
from gyre.ops.path_kv import PathKV
from gyre.ops.tree_attention import DEFAULT_BLOCK_SIZE, LayerKVCapture, make_plan

# (edge indices or None for all, their log-probs, their entropies or None) -> (loss summed over them, statistics)
EdgeLoss = Callable[[torch.Tensor | None, torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, dict[str, float]]]


@dataclass
class ChunkReport:
    """What a chunked pass did: chunks run, rows recomputed for the path's gradients, peak path size."""

    chunks: int = 0
    recomputed_tokens: int = 0
    peak_path_rows: int = 0
    peak_path_bytes: int = 0


def local_subtree_end(rows: np.ndarray, subtree_end: np.ndarray) -> np.ndarray:
    """``subtree_end`` re-indexed into the increasing rows ``rows`` (a query range plus all its ancestors):
    key ``i`` is visible to query ``j`` there iff it was in the whole layout."""
    return np.searchsorted(rows, subtree_end[rows], side="left")


class _ChunkRunner:
    """Forwards of row sets of one packed layout against the rows stacked on a ``PathKV``."""

    def __init__(self, model: torch.nn.Module, batch: dict[str, Any], *, backend: str, block_size: int,
                 temperature: float, with_entropy: bool, with_grads: bool) -> None:
        use_tree_attention(model)
        self.model = model
        self.batch = batch
        self.device = batch["ids"].device
        self.subtree_end = batch["subtree_end"].cpu().numpy()
        self.backend, self.block_size = backend, block_size
        self.temperature, self.with_entropy = temperature, with_entropy
        self.path = PathKV(with_grads=with_grads)
        self.edge_row = batch["edge_row"].cpu().numpy()
        self._edge_order = np.argsort(self.edge_row, kind="stable")
        self._edge_rows_sorted = self.edge_row[self._edge_order]
        self.report = ChunkReport()

    @property
    def num_rows(self) -> int:
        return int(self.subtree_end.shape[0])

    def edges_in(self, start: int, end: int) -> np.ndarray:
        """Indices of the edges whose predicting row lies in ``[start, end)``, increasing."""
        lo, hi = np.searchsorted(self._edge_rows_sorted, [start, end])
        return np.sort(self._edge_order[lo:hi])

    def forward(self, rows: np.ndarray, past_end: int, logit_rows: np.ndarray):
        """Rows ``rows`` (increasing) against stack rows ``[0, past_end)`` (their ancestors outside ``rows``).

        Returns (logits at ``logit_rows`` [n, V], each layer's own keys/values, the past leaves)."""
        combined = np.concatenate([self.path.row_ids(past_end), rows])
        layout = torch.as_tensor(local_subtree_end(combined, self.subtree_end), device=self.device)
        plan = make_plan(layout, self.backend, self.block_size, query_start=past_end)
        plan.past = self.path.leaves(past_end)
        plan.captured = LayerKVCapture()
        index = torch.as_tensor(rows, device=self.device)
        keep = torch.as_tensor(np.searchsorted(rows, logit_rows), dtype=torch.long, device=self.device)
        output = self.model(
            input_ids=self.batch["ids"][index][None],
            position_ids=self.batch["depth"][index][None],
            attention_mask={"full_attention": plan},
            logits_to_keep=keep,
            use_cache=False,
        )
        own = [plan.captured.layers[layer] for layer in sorted(plan.captured.layers)]
        return output.logits[0], own, plan.past

    def logprobs(self, logits: torch.Tensor, edges: np.ndarray):
        labels = self.batch["edge_label"][torch.as_tensor(edges, device=self.device)]
        return gather_logprobs(logits, labels, self.temperature, self.with_entropy)

    def chunk_bounds(self, chunk_tokens: int) -> list[tuple[int, int]]:
        if chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
        return [(start, min(start + chunk_tokens, self.num_rows)) for start in range(0, self.num_rows, chunk_tokens)]

    def still_open(self, position: int) -> int:
        """How many stacked rows have a subtree reaching past ``position`` (a prefix of the stack)."""
        ends = self.subtree_end[self.path.row_ids()]
        return int((ends > position).sum())

    def push_open_rows(self, start: int, end: int, own: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Stack the rows of chunk ``[start, end)`` whose subtree continues past ``end``."""
        local = np.flatnonzero(self.subtree_end[start:end] > end)
        if local.size == 0:
            return
        index = torch.as_tensor(local, device=self.device)
        self.path.push(start + local, [(k.index_select(2, index), v.index_select(2, index)) for k, v in own])
        self.report.peak_path_rows = max(self.report.peak_path_rows, self.path.length)
        self.report.peak_path_bytes = max(self.report.peak_path_bytes, self.path.nbytes())


def chunked_tree_backward(
    model: torch.nn.Module,
    batch: dict[str, Any],
    chunk_tokens: int,
    edge_loss: EdgeLoss,
    *,
    temperature: float = 1.0,
    backend: str = "auto",
    block_size: int = DEFAULT_BLOCK_SIZE,
    with_entropy: bool = False,
) -> tuple[list[dict[str, float]], ChunkReport]:
    """Accumulate the gradient of ``sum over chunks of edge_loss`` (= the whole packed batch's loss) into
    ``model``; returns each chunk's statistics and a report. ``batch`` holds ``to_torch`` tensors."""
    runner = _ChunkRunner(model, batch, backend=backend, block_size=block_size, temperature=temperature,
                          with_entropy=with_entropy, with_grads=True)
    stats: list[dict[str, float]] = []
    for start, end in runner.chunk_bounds(chunk_tokens):
        runner.report.chunks += 1
        past_end = runner.path.length
        edges = runner.edges_in(start, end)
        rows = np.arange(start, end)
        if edges.size:
            logits, own, leaves = runner.forward(rows, past_end, runner.edge_row[edges])
            logp, entropy = runner.logprobs(logits, edges)
            loss, chunk_stats = edge_loss(torch.as_tensor(edges, device=runner.device), logp, entropy)
            loss.backward()
            runner.path.accumulate(leaves)
            stats.append(chunk_stats)
            del logits, logp, entropy, loss, leaves  # free this chunk's logits before the next forward
        else:  # nothing to train here: only the open rows' keys/values matter (their gradients come in step 2)
            with torch.no_grad():
                _, own, _ = runner.forward(rows, past_end, np.zeros(0, np.int64))
        own = [(k.detach(), v.detach()) for k, v in own]
        _release_finished(runner, end, chunk_tokens)
        runner.push_open_rows(start, end, own)
    _release_finished(runner, runner.num_rows, chunk_tokens)
    return stats, runner.report


def _release_finished(runner: _ChunkRunner, position: int, chunk_tokens: int) -> None:
    """Backpropagate the carried key/value gradients of stacked rows whose subtree ends by ``position``,
    deepest first, and drop them from the stack."""
    keep = runner.still_open(position)
    while runner.path.length > keep:
        top = runner.path.length
        first = max(keep, top - chunk_tokens)
        rows = runner.path.row_ids()[first:top].copy()
        grads = runner.path.grads(first, top)
        _, own, leaves = runner.forward(rows, first, np.zeros(0, np.int64))
        outputs = [t for pair in own for t in pair]
        carried = [g for pair in grads for g in pair]
        torch.autograd.backward(outputs, carried)
        runner.path.accumulate(leaves)
        runner.path.truncate(first)
        runner.report.recomputed_tokens += top - first


@torch.no_grad()
def chunked_tree_logprobs(
    model: torch.nn.Module,
    batch: dict[str, Any],
    chunk_tokens: int,
    *,
    temperature: float = 1.0,
    backend: str = "auto",
    block_size: int = DEFAULT_BLOCK_SIZE,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``tree_logprobs`` of a batch of any length, chunk by chunk, holding only the live path's keys/values."""
    runner = _ChunkRunner(model, batch, backend=backend, block_size=block_size, temperature=temperature,
                          with_entropy=with_entropy, with_grads=False)
    num_edges = int(batch["edge_row"].shape[0])
    logp_all = torch.zeros(num_edges, dtype=torch.float32, device=runner.device)
    entropy_all = torch.zeros(num_edges, dtype=torch.float32, device=runner.device) if with_entropy else None
    for start, end in runner.chunk_bounds(chunk_tokens):
        edges = runner.edges_in(start, end)
        logits, own, _ = runner.forward(np.arange(start, end), runner.path.length, runner.edge_row[edges])
        if edges.size:
            logp, entropy = runner.logprobs(logits, edges)
            index = torch.as_tensor(edges, device=runner.device)
            logp_all[index] = logp
            if entropy_all is not None and entropy is not None:
                entropy_all[index] = entropy
        runner.path.truncate(runner.still_open(end))
        runner.push_open_rows(start, end, own)
    return logp_all, entropy_all
