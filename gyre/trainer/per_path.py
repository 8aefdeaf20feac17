"""Per-path training: every kept path of every tree run as its own causal sequence.

This is the objective tree-packed training must reproduce exactly (tests) and the baseline it is timed
against (benchmarks/tree_training.py). It uses the model's ordinary causal attention, no tree machinery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gyre.algo.losses import LossConfig, tree_policy_loss
from gyre.ops.forward import gather_logprobs
from gyre.protocol import TrajectoryTree
from gyre.trajectory.weights import path_token_weights


@dataclass
class PathSample:
    ids: np.ndarray
    targets: np.ndarray  # positions in the path whose token is trained (predicted by position - 1)
    behavior_logprob: np.ndarray
    coef: np.ndarray  # c[p, t] per target
    advantage: float


def expand_paths(
    trees: Sequence[TrajectoryTree], advantages: Sequence[float], *, num_executions: int, aggregation: str
) -> list[PathSample]:
    samples = []
    for tree, advantage in zip(trees, advantages):
        for path in range(tree.num_paths):
            indices, coef = path_token_weights(tree, path, num_executions=num_executions, aggregation=aggregation)
            targets = np.flatnonzero(tree.is_policy[indices] & (np.arange(indices.shape[0]) > 0))
            samples.append(
                PathSample(
                    tree.ids[indices], targets, tree.behavior_logprob[indices][targets], coef[targets],
                    float(advantage),
                )
            )
    return samples


def path_backward(model: torch.nn.Module, sample: PathSample, cfg: LossConfig) -> torch.Tensor:
    """Forward + backward of one path; returns its loss (gradients accumulate into the model)."""
    device = next(model.parameters()).device
    ids = torch.as_tensor(sample.ids, device=device)[None]
    targets = torch.as_tensor(sample.targets, device=device)
    logits = model(input_ids=ids, logits_to_keep=targets - 1, use_cache=False).logits[0]
    logp, entropy = gather_logprobs(logits, ids[0, targets], cfg.temperature, bool(cfg.entropy_coef))
    coef = torch.as_tensor(sample.coef, dtype=torch.float64, device=device)
    weight = coef * sample.advantage
    loss, _ = tree_policy_loss(
        logp, torch.as_tensor(sample.behavior_logprob, device=device),
        weight.clamp(min=0), weight.clamp(max=0), coef, cfg, entropy=entropy,
        # Before any update the proximal policy is the model itself, so its log-probs are these, detached.
        proximal_logp=logp.detach() if cfg.proximal == "recompute" else None,
    )
    loss.backward()
    return loss.detach()
