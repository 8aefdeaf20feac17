"""Pack weighted trees into micro-batches: one sequence per micro-batch, trees laid end to end.

First-fit decreasing by tree size. A tree longer than the micro-batch limit is an error naming its
execution; trees are never truncated (partitioning one tree across micro-batches is future work).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gyre.protocol import PackedBatch, TrajectoryTree


class TreeTooLongError(ValueError):
    pass


def pack_trees(trees: Sequence[TrajectoryTree], max_tokens: int) -> list[PackedBatch]:
    """Micro-batches of at most ``max_tokens`` tokens each, every tree whole in exactly one of them."""
    for tree in trees:
        if tree.num_tokens > max_tokens:
            raise TreeTooLongError(
                f"execution {tree.execution_id!r}: its tree has {tree.num_tokens} tokens, more than "
                f"trainer.max_tokens_per_microbatch={max_tokens}; raise the limit (trees are never truncated)"
            )
    bins: list[list[TrajectoryTree]] = []
    free: list[int] = []
    for tree in sorted(trees, key=lambda t: t.num_tokens, reverse=True):
        for index, room in enumerate(free):
            if tree.num_tokens <= room:
                bins[index].append(tree)
                free[index] -= tree.num_tokens
                break
        else:
            bins.append([tree])
            free.append(max_tokens - tree.num_tokens)
    return [concat_trees(group) for group in bins]


def concat_trees(trees: Sequence[TrajectoryTree]) -> PackedBatch:
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
    )
