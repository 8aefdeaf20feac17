"""Bounded path sampling: keep at most ``max_paths`` root-to-leaf paths of an execution's tree.

Paths are ranked by what they train, role by role (main > main-summary > sub > sub-summary): first paths
are drawn by the main agent's policy tokens they would add, then by summary tokens, and so on. Within a
role, paths are drawn one at a time with probability proportional to that role's policy tokens a path
would add that the paths already chosen do not cover. The call that *ends* a path does not decide its
rank: the main agent's turns before a context rewrite lie only on the path that ends in the summary call,
and a sub-agent forked from the main conversation carries the main turns before the fork. A path that
would add no policy token is never drawn: it would cost forward/backward time and train nothing.
"""

from __future__ import annotations

import numpy as np

from gyre.protocol import TrajectoryTree


def ancestor_sums(tree: TrajectoryTree, values: np.ndarray) -> np.ndarray:
    """For every token q, the sum of ``values[k]`` over its ancestors-or-self k (k <= q < subtree_end[k]).

    Token k adds its value on the index range [k, subtree_end[k]): a difference array and one cumsum.
    """
    n = tree.num_tokens
    values = np.asarray(values, dtype=np.float64)
    diff = np.bincount(np.arange(n), weights=values, minlength=n + 1)
    diff -= np.bincount(tree.subtree_end, weights=values, minlength=n + 1)
    return np.cumsum(diff)[:n]


def select_paths(tree: TrajectoryTree, max_paths: int | None, rng: np.random.Generator) -> list[int]:
    """Indices of the paths to keep (all of them when ``max_paths`` is None or not exceeded)."""
    if max_paths is not None and max_paths < 1:
        raise ValueError(f"trajectory.max_paths must be >= 1 or null, got {max_paths}")
    if max_paths is None or tree.num_paths <= max_paths:
        return list(range(tree.num_paths))
    trainable = tree.is_policy & (tree.parent >= 0)
    uncovered = trainable.copy()
    chosen: list[int] = []
    for role in sorted(set(tree.token_agent[trainable].tolist())):
        role_tokens = trainable & (tree.token_agent == role)
        candidates = [path for path in range(tree.num_paths) if path not in chosen]
        while candidates and len(chosen) < max_paths:
            gains = ancestor_sums(tree, uncovered & role_tokens)[tree.leaves[candidates]]
            total = gains.sum()
            if total <= 0:
                break
            pick = candidates.pop(int(rng.choice(len(candidates), p=gains / total)))
            chosen.append(pick)
            uncovered[tree.path_indices(pick)] = False
        if len(chosen) == max_paths:
            break
    if not chosen:
        # No path adds a policy token (an execution without generated tokens): keep one for its context.
        chosen.append(0)
    return sorted(chosen)
