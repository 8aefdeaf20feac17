"""Losses and advantage estimators."""

from gyre.algo.advantages import compute_advantages
from gyre.algo.losses import LossConfig, tree_policy_loss

__all__ = ["LossConfig", "compute_advantages", "tree_policy_loss"]
