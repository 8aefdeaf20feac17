"""From finished executions to weighted trees: build, cap the paths, compute advantages and weights."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gyre.algo.advantages import compute_advantages
from gyre.protocol import Execution, TrajectoryTree
from gyre.trajectory.sampling import select_paths
from gyre.trajectory.tree import build_tree, prune_tree
from gyre.trajectory.weights import assign_loss_weights


@dataclass
class TrajectoryConfig:
    max_paths: int | None = 5
    loss_agg: str = "execution_token_mean"
    adv_estimator: str = "grpo"
    norm_adv_by_std: bool = False
    seed: int = 0


def process_executions(executions: Sequence[Execution], cfg: TrajectoryConfig) -> list[TrajectoryTree]:
    """Weighted, pruned trees for one training step. Executions without calls are skipped (no tokens)."""
    executions = [execution for execution in executions if execution.calls]
    if not executions:
        return []
    advantages = compute_advantages(
        [execution.reward for execution in executions],
        [execution.group for execution in executions],
        estimator=cfg.adv_estimator,
        norm_std=cfg.norm_adv_by_std,
    )
    trees = []
    for execution, advantage in zip(executions, advantages):
        tree = build_tree(execution.calls, execution.id)
        # Seeded per execution so the choice does not depend on batch order.
        rng = np.random.default_rng([cfg.seed, _stable_hash(execution.id)])
        tree = prune_tree(tree, select_paths(tree, cfg.max_paths, rng))
        trees.append(assign_loss_weights(tree, advantage, num_executions=len(executions), aggregation=cfg.loss_agg))
    return trees


def _stable_hash(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode())
