"""Policy loss on tree edges: PPO clipping with the A+/A- split, decoupled importance sampling, KL, entropy.

Per edge (one trained token), with ``r = exp(logp - logp_prox)``:

    objective = min(r, 1 + clip_high) * w_plus + min(max(r, 1 - clip_low), dual_clip) * w_minus

``w_plus`` >= 0 and ``w_minus`` <= 0 are the advantage-weighted path weights through the edge, split by
sign. That is exactly the sum over paths of the per-path clipped PPO objective, because for A > 0 the clipped
term is ``A * min(r, 1 + eps)`` and for A < 0 it is ``A * max(r, 1 - eps)``; summing signed advantages
before clipping would not be. ``dual_clip`` (optional) caps the ratio on negative advantages.

The proximal policy ``logp_prox`` is the trainer's own log-prob before the update when recomputed
(``algo.proximal=recompute``), else the behaviour log-prob recorded by the engine. With a recomputed
proximal policy the engine/trainer mismatch and staleness are corrected by the truncated importance
weight ``min(exp(logp_prox - logp_behavior), tis_cap)`` (detached), as in decoupled PPO.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float | None = None
    proximal: str = "behavior"  # behavior | recompute
    tis_cap: float | None = 2.0
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.proximal not in ("behavior", "recompute"):
            raise ValueError(f"algo.proximal must be 'behavior' or 'recompute', got {self.proximal!r}")
        if not (0 < self.clip_low < 1 and self.clip_high > 0):
            raise ValueError(f"algo.clip_low must be in (0, 1) and clip_high > 0, got {self.clip_low}, {self.clip_high}")
        if self.temperature <= 0:
            raise ValueError(f"algo.temperature must be > 0, got {self.temperature}")


def tree_policy_loss(
    logp: torch.Tensor,
    behavior_logp: torch.Tensor,
    w_plus: torch.Tensor,
    w_minus: torch.Tensor,
    w_tok: torch.Tensor,
    cfg: LossConfig,
    *,
    proximal_logp: torch.Tensor | None = None,
    ref_logp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Loss summed over edges (the weights already hold every normalisation) and per-batch statistics."""
    dtype = w_plus.dtype
    logp = logp.to(dtype)
    behavior_logp = behavior_logp.to(dtype)
    prox = behavior_logp if proximal_logp is None else proximal_logp.to(dtype).detach()
    ratio = torch.exp(logp - prox)
    upper = torch.clamp(ratio, max=1.0 + cfg.clip_high)
    lower = torch.clamp(ratio, min=1.0 - cfg.clip_low)
    if cfg.dual_clip is not None:
        lower = torch.clamp(lower, max=cfg.dual_clip)
    objective = upper * w_plus + lower * w_minus
    if proximal_logp is not None:
        is_weight = torch.exp(prox - behavior_logp)
        if cfg.tis_cap is not None:
            is_weight = torch.clamp(is_weight, max=cfg.tis_cap)
        objective = objective * is_weight.detach()
    loss = -objective.sum()
    stats: dict[str, float] = {"pg_loss": float(loss.detach())}
    if cfg.kl_coef:
        if ref_logp is None:
            raise ValueError("algo.kl_coef > 0 needs reference log-probs (a reference model)")
        delta = ref_logp.to(dtype).detach() - logp
        kl = (torch.exp(delta) - delta - 1.0) * w_tok  # k3 estimator, unbiased and >= 0
        loss = loss + cfg.kl_coef * kl.sum()
        stats["kl"] = float(kl.sum().detach())
    if cfg.entropy_coef:
        if entropy is None:
            raise ValueError("algo.entropy_coef > 0 needs entropies from the forward pass")
        entropy_term = (entropy.to(dtype) * w_tok).sum()
        loss = loss - cfg.entropy_coef * entropy_term
        stats["entropy"] = float(entropy_term.detach())
    with torch.no_grad():
        clipped = ((ratio > 1.0 + cfg.clip_high) & (w_plus > 0)) | ((ratio < 1.0 - cfg.clip_low) & (w_minus < 0))
        stats["clipped_weight"] = float((w_tok * clipped).sum())
        stats["weight"] = float(w_tok.sum())
        stats["clipped_edges"] = float(clipped.sum())
        stats["edges"] = float(ratio.numel())
        stats["ratio_max"] = float(ratio.max()) if ratio.numel() else 1.0
    return loss, stats
