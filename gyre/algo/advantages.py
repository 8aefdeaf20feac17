"""Advantage estimators over groups of executions of the same task (one advantage per execution)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

ESTIMATORS = ("grpo", "rloo")


def compute_advantages(
    rewards: Sequence[float],
    groups: Sequence[str],
    *,
    estimator: str = "grpo",
    norm_std: bool = False,
    eps: float = 1e-6,
) -> np.ndarray:
    """GRPO: reward minus its group's mean (optionally divided by the group's std). RLOO: reward minus the
    mean of the *other* members of its group. A group of one has no baseline to compare with: advantage 0."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"algo.adv_estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group labels")
    rewards = np.asarray(rewards, dtype=np.float64)
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    advantages = np.zeros_like(rewards)
    for index_list in members.values():
        index = np.asarray(index_list)
        r, n = rewards[index], len(index_list)
        if n < 2:
            continue
        if estimator == "grpo":
            a = r - r.mean()
            if norm_std:
                a = a / (r.std(ddof=1) + eps)
        else:
            a = (r - (r.sum() - r) / (n - 1))
        advantages[index] = a
    return advantages
