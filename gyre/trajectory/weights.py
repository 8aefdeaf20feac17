"""Loss weights of a tree's edges, equal to the sum of the kept paths' per-token weights through them.

Per-path view: path p of execution e weights its policy token t by ``c[p, t]``, times its advantage A_p.
The tree trains every token once, with edge weights ``w = sum over kept paths through t of c[p, t] * A_p``
split by the sign of A_p (``w_plus``, ``w_minus``) so that PPO clipping stays exact, and ``w_tok`` (the sum
of ``c[p, t]`` without advantage) for the entropy and KL terms. Two normalisations:

- ``execution_token_mean`` (default): the loss is averaged over the execution's unique policy tokens, then
  across executions; a token shared by m paths gets ``c = 1 / (E * N_e * m)`` per path, so it counts once.
- ``path_token_mean``: every kept path is averaged over its own policy tokens, paths averaged within the
  execution, executions averaged: ``c = 1 / (E * P_e * n_p)`` (shared tokens count once per path).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gyre.protocol import TrajectoryTree
from gyre.trajectory.sampling import ancestor_sums

LOSS_AGGREGATIONS = ("execution_token_mean", "path_token_mean")


def trainable_tokens(tree: TrajectoryTree) -> np.ndarray:
    """Policy tokens that some row predicts (a root token has no row before it)."""
    return tree.is_policy & (tree.parent >= 0)


def path_coefficients(tree: TrajectoryTree, aggregation: str, num_executions: int) -> tuple[np.ndarray, np.ndarray]:
    """(per-path factor g[p], per-token factor h[t]) with ``c[p, t] = g[p] * h[t]`` for t on path p."""
    if aggregation not in LOSS_AGGREGATIONS:
        raise ValueError(f"trajectory.loss_agg must be one of {LOSS_AGGREGATIONS}, got {aggregation!r}")
    trainable = trainable_tokens(tree)
    if aggregation == "execution_token_mean":
        unique = max(int(trainable.sum()), 1)
        through = np.maximum(tree.paths_through(), 1)
        return np.ones(tree.num_paths), 1.0 / (num_executions * unique * through)
    per_path = ancestor_sums(tree, trainable)[tree.leaves]
    g = 1.0 / (num_executions * tree.num_paths * np.maximum(per_path, 1.0))
    return g, np.ones(tree.num_tokens)


def subtree_path_sums(tree: TrajectoryTree, per_path: np.ndarray) -> np.ndarray:
    """For every token, the sum of ``per_path`` over the paths whose leaf lies in its subtree."""
    order = np.argsort(tree.leaves)
    leaves = tree.leaves[order]
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(per_path, dtype=np.float64)[order])])
    lo = np.searchsorted(leaves, np.arange(tree.num_tokens))
    hi = np.searchsorted(leaves, tree.subtree_end)
    return cumulative[hi] - cumulative[lo]


def assign_loss_weights(
    tree: TrajectoryTree,
    advantage: float | Sequence[float] | np.ndarray,
    *,
    num_executions: int,
    aggregation: str = "execution_token_mean",
) -> TrajectoryTree:
    """Fill the tree's edge arrays in place (and return it). ``advantage`` is one value or one per path."""
    advantages = np.broadcast_to(np.asarray(advantage, dtype=np.float64), (tree.num_paths,))
    g, h = path_coefficients(tree, aggregation, num_executions)
    targets = np.flatnonzero(trainable_tokens(tree))
    tree.edge_target = targets
    tree.edge_row = tree.parent[targets]
    tree.edge_label = tree.ids[targets]
    tree.w_plus = (subtree_path_sums(tree, g * np.maximum(advantages, 0.0)) * h)[targets]
    tree.w_minus = (subtree_path_sums(tree, g * np.minimum(advantages, 0.0)) * h)[targets]
    tree.w_tok = (subtree_path_sums(tree, g) * h)[targets]
    return tree


def path_token_weights(
    tree: TrajectoryTree, path: int, *, num_executions: int, aggregation: str = "execution_token_mean"
) -> tuple[np.ndarray, np.ndarray]:
    """For per-path training: (token indices on the path, their coefficient ``c[p, t]``; 0 for context)."""
    g, h = path_coefficients(tree, aggregation, num_executions)
    indices = tree.path_indices(path)
    return indices, np.where(trainable_tokens(tree)[indices], g[path] * h[indices], 0.0)
