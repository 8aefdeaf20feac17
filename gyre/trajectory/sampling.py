"""Bounded path sampling: keep at most ``max_paths`` root-to-leaf paths of an execution's tree.

Paths are taken by agent priority (main > main-summary > sub > sub-summary); within a priority class
they are drawn one at a time with probability proportional to the policy tokens a path would add that the
paths already chosen do not cover. A path that would add no policy token is never drawn: it would cost
forward/backward time and train nothing.
"""

from __future__ import annotations

import numpy as np

from gyre.protocol import AGENT_PRIORITY, TrajectoryTree


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
    priorities = np.asarray([AGENT_PRIORITY[agent] for agent in tree.leaf_agent])
    for priority in sorted(set(priorities.tolist())):
        candidates = [int(p) for p in np.flatnonzero(priorities == priority)]
        while candidates and len(chosen) < max_paths:
            gains = ancestor_sums(tree, uncovered)[tree.leaves[candidates]]
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
