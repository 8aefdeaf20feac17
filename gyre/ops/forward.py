"""Tree-packed forward: log-probs (and entropies) of every edge label of a packed micro-batch."""

from __future__ import annotations

from typing import Any

import torch

from gyre.ops.tree_attention import (
    DEFAULT_BLOCK_SIZE,
    make_plan,
    register_tree_attention,
)


def use_tree_attention(model: torch.nn.Module) -> None:
    """Switch an HF model to the ``gyre_tree`` attention function (plain calls still run SDPA)."""
    name = register_tree_attention()
    if getattr(model.config, "_attn_implementation", None) != name:
        model.set_attn_implementation(name)
    layer_types = getattr(model.config, "layer_types", None) or []
    if any(kind != "full_attention" for kind in layer_types):
        raise NotImplementedError(
            f"tree attention supports full-attention layers only; this model has layer types {sorted(set(layer_types))}"
        )


def gather_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float, with_entropy: bool):
    """log softmax(logits / T)[label] per row, in float32; optional entropy of the same distribution."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp_all.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, entropy


def tree_logprobs(
    model: torch.nn.Module,
    batch: dict[str, Any],
    *,
    temperature: float = 1.0,
    backend: str = "auto",
    block_size: int = DEFAULT_BLOCK_SIZE,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs at the batch's edges ``(edge_row, edge_label)``; logits are computed for edge rows only."""
    use_tree_attention(model)
    plan = make_plan(batch["subtree_end"], backend, block_size)
    output = model(
        input_ids=batch["ids"][None],
        position_ids=batch["depth"][None],
        attention_mask={"full_attention": plan},
        logits_to_keep=batch["edge_row"],
        use_cache=False,
    )
    return gather_logprobs(output.logits[0], batch["edge_label"], temperature, with_entropy)
