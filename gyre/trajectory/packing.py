"""Pack weighted trees into micro-batches: one sequence per micro-batch.

Trees that fit a micro-batch are ordered so that trees sharing prompt prefixes are adjacent, then filled
into micro-batches in that order, each holding at most ``max_tokens`` tokens *after* its trees' common
prompts are laid out once (`gyre.trajectory.sharing`: a GRPO group's samples repeat the whole task
prompt, every execution the system prompts of its main agent and sub-agents). A tree longer than the limit is never refused or truncated:
it becomes a work item of its own, marked to train in chunks of at most the limit
(``PackedBatch.chunk_tokens``), which gives exactly the loss and gradients of training it whole
(``gyre.ops.chunked``). A work item is trained by one replica, so all chunks of a tree stay together.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gyre.protocol import PackedBatch, TrajectoryTree
from gyre.trajectory.sharing import CrownTrie, crown, merge_trees, prefix_key


def pack_trees(trees: Sequence[TrajectoryTree], max_tokens: int) -> list[PackedBatch]:
    """Work items of at most ``max_tokens`` tokens per forward pass: small trees share micro-batches
    (every tree whole in exactly one, shared prompts once); each longer tree is an item of its own,
    trained in chunks. Chunked items come first (the longest work starts first when replicas pull items)."""
    if max_tokens < 1:
        raise ValueError(f"trainer.max_tokens_per_microbatch must be >= 1, got {max_tokens}")
    long_trees = sorted((t for t in trees if t.num_tokens > max_tokens), key=lambda t: t.num_tokens, reverse=True)
    chunked = [concat_trees([tree], chunk_tokens=max_tokens) for tree in long_trees]
    bins: list[list[TrajectoryTree]] = []
    trie = CrownTrie()
    size = 0
    for tree in sorted((t for t in trees if t.num_tokens <= max_tokens), key=prefix_key):
        # Trees in prefix order: the merged size grows by the tree's crown tokens not yet laid out, plus the rest.
        mask = crown(tree)
        own = int((~mask).sum())
        if not bins or size + trie.new_tokens(tree, mask) + own > max_tokens:
            bins.append([])
            trie, size = CrownTrie(), 0
        size_before = len(trie)
        trie.add(tree, mask)
        size += len(trie) - size_before + own
        bins[-1].append(tree)
    return chunked + [merge_trees(group) for group in bins]


def concat_trees(trees: Sequence[TrajectoryTree], chunk_tokens: int | None = None) -> PackedBatch:
    """Lay trees end to end, shifting every index array by the tree's start."""
    starts = np.concatenate([[0], np.cumsum([tree.num_tokens for tree in trees])]).astype(np.int64)

    def cat(name: str, shift: bool = False) -> np.ndarray:
        parts = [getattr(tree, name) + (start if shift else 0) for tree, start in zip(trees, starts)]
        return np.concatenate(parts) if parts else np.zeros(0)

    return PackedBatch(
        execution_ids=[tree.execution_id for tree in trees],
        ids=cat("ids"),
        depth=cat("depth"),
        subtree_end=cat("subtree_end", shift=True),
        is_policy=cat("is_policy"),
        behavior_logprob=cat("behavior_logprob"),
        weight_version=cat("weight_version"),
        tree_ptr=starts,
        edge_row=cat("edge_row", shift=True),
        edge_label=cat("edge_label"),
        edge_target=cat("edge_target", shift=True),
        w_plus=cat("w_plus"),
        w_minus=cat("w_minus"),
        w_tok=cat("w_tok"),
        path_tokens=sum(tree.path_token_count() for tree in trees),
        chunk_tokens=chunk_tokens,
    )
