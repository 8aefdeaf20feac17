"""Trajectory processor: calls -> prefix-shared trees -> bounded sampling -> loss weights -> packing."""

from gyre.trajectory.packing import concat_trees, pack_trees
from gyre.trajectory.processor import TrajectoryConfig, process_executions
from gyre.trajectory.sampling import ancestor_sums, select_paths
from gyre.trajectory.tree import build_tree, prune_tree
from gyre.trajectory.weights import assign_loss_weights, path_token_weights

__all__ = [
    "TrajectoryConfig",
    "ancestor_sums",
    "assign_loss_weights",
    "build_tree",
    "concat_trees",
    "pack_trees",
    "path_token_weights",
    "process_executions",
    "prune_tree",
    "select_paths",
]
