"""From finished executions to weighted trees: build, cap the paths, compute advantages and weights.

Rule for executions without model calls (a harness that failed before its first call, or ran out of
time first): the policy never acted in them, so their reward says nothing about it. They are left out of
training and out of their group's baseline (the group's other members are compared with each other
only); the driver logs how many there were each step (``executions/no_calls``).
"""

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
    shuffle_rewards: bool = False  # control runs: rewards permuted across the step's executions (no signal)


def process_executions(executions: Sequence[Execution], cfg: TrajectoryConfig,
                       num_executions: int | None = None) -> list[TrajectoryTree]:
    """Weighted, pruned trees for one training step (executions without calls: see the module docstring).

    ``num_executions``: what the loss averages over (default: these executions with calls). A step that
    streams in its batch's tail processes each arrival on its own with the batch size here, and its
    gradients are rescaled to the final count before the update (``Cluster.train_step``'s ``grad_scale``)."""
    executions = [execution for execution in executions if execution.calls]
    if not executions:
        return []
    rewards = np.asarray([execution.reward for execution in executions])
    if cfg.shuffle_rewards:
        # Seeded by the step's executions, so a rerun shuffles the same way whatever their order.
        order = sorted(range(len(executions)), key=lambda i: executions[i].id)
        key = _stable_hash("|".join(executions[i].id for i in order))
        rewards[order] = rewards[order][np.random.default_rng([cfg.seed, key]).permutation(len(order))]
    advantages = compute_advantages(
        rewards, [execution.group for execution in executions], estimator=cfg.adv_estimator, norm_std=cfg.norm_adv_by_std
    )
    trees = []
    for execution, advantage in zip(executions, advantages):
        tree = build_tree(execution.calls, execution.id)
        # Seeded per execution so the choice does not depend on batch order.
        rng = np.random.default_rng([cfg.seed, _stable_hash(execution.id)])
        tree = prune_tree(tree, select_paths(tree, cfg.max_paths, rng))
        trees.append(assign_loss_weights(tree, advantage, num_executions=num_executions or len(executions),
                                         aggregation=cfg.loss_agg))
    return trees


def _stable_hash(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode())
