"""Tree attention backends. The single rule: key k is visible to query q iff ``k <= q < subtree_end[k]``.

- ``dense``: the reference. A [L, L] bool mask through SDPA; memory and time grow with L squared.
- ``block`` (CPU default): queries are cut into blocks of ``block_size`` preorder rows; a block attends only
  to the keys visible to at least one of its rows (``k < q_end`` and ``subtree_end[k] > q_start``: its
  ancestors and its own rows). Sibling subtrees are never touched, so attention cost follows the tree's
  ancestor area instead of the packed length squared. Keys are a zero-copy slice of K/V when they are
  (nearly) contiguous, as along a long chain, else a gather. SDPA runs its fused CPU kernel, which keeps
  only a log-sum-exp per row for backward, so no attention matrix is stored; the per-block masks (one byte
  per attended pair, built once and shared by all layers) are what remains beyond linear memory.
- ``flex`` (CUDA default): compiled ``flex_attention`` with a ``BlockMask`` built from ``subtree_end``.

A backend is chosen by handing the model a ``TreeAttentionPlan`` as its mask (see ``gyre.ops.forward``);
the attention function registered as ``gyre_tree`` dispatches on it and falls back to plain SDPA for
ordinary calls, so one model serves tree-packed and normal forwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

BACKENDS = ("auto", "dense", "block", "flex")


def dense_tree_mask(subtree_end: torch.Tensor) -> torch.Tensor:
    """[L, L] bool, True where query (row) may attend key (column)."""
    n = subtree_end.shape[0]
    index = torch.arange(n, device=subtree_end.device)
    q, k = index[:, None], index[None, :]
    return (k <= q) & (q < subtree_end[None, :])


@dataclass
class QueryBlock:
    """Rows ``[start, end)`` attend to ``keys``: a contiguous range ``(lo, hi)`` (a zero-copy view of K/V)
    when it wastes little, else an index tensor (a gather). ``mask`` is shared by every layer."""

    start: int
    end: int
    keys: torch.Tensor | tuple[int, int]
    mask: torch.Tensor | None

    @property
    def num_keys(self) -> int:
        return self.keys[1] - self.keys[0] if isinstance(self.keys, tuple) else int(self.keys.shape[0])


@dataclass
class TreeAttentionPlan:
    """Everything a tree attention call needs, computed once per micro-batch and shared by all layers."""

    subtree_end: torch.Tensor
    backend: str
    blocks: list[QueryBlock] = field(default_factory=list)
    block_mask: Any = None  # flex BlockMask
    dense_mask: torch.Tensor | None = None

    @property
    def attended_pairs(self) -> int:
        """Query-key pairs computed: the attention cost actually paid (block backend)."""
        return sum((b.end - b.start) * b.num_keys for b in self.blocks)


def resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"trainer.attention_backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "flex" if device.type == "cuda" else "block"
    return backend


def make_plan(subtree_end: torch.Tensor, backend: str = "auto", block_size: int = 256) -> TreeAttentionPlan:
    backend = resolve_backend(backend, subtree_end.device)
    plan = TreeAttentionPlan(subtree_end=subtree_end, backend=backend)
    if backend == "dense":
        plan.dense_mask = dense_tree_mask(subtree_end)
    elif backend == "block":
        plan.blocks = _query_blocks(subtree_end, block_size)
    else:
        plan.block_mask = _flex_block_mask(subtree_end)
    return plan


# A contiguous key range is used instead of a gather when at most this share of it is invisible.
_MAX_RANGE_WASTE = 0.25


def _query_blocks(subtree_end: torch.Tensor, block_size: int) -> list[QueryBlock]:
    n = subtree_end.shape[0]
    index = torch.arange(n, device=subtree_end.device)
    blocks = []
    for start in range(0, n, block_size):
        end = min(start + block_size, n)
        visible = index[:end][subtree_end[:end] > start]  # keys whose subtree reaches into the block
        lo = int(visible[0])
        keys: torch.Tensor | tuple[int, int]
        if (end - lo) * (1 - _MAX_RANGE_WASTE) <= visible.shape[0]:
            keys, key_index = (lo, end), index[lo:end]
        else:
            keys = key_index = visible
        rows = index[start:end, None]
        mask = (key_index[None, :] <= rows) & (rows < subtree_end[key_index][None, :])
        blocks.append(QueryBlock(start, end, keys, mask))
    return blocks


def _select(tensor: torch.Tensor, keys: torch.Tensor | tuple[int, int]) -> torch.Tensor:
    if isinstance(keys, tuple):
        return tensor[:, :, keys[0] : keys[1]]
    return tensor.index_select(2, keys)


def block_tree_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, plan: TreeAttentionPlan, scaling: float
) -> torch.Tensor:
    """Each query block against only the keys it can see. query [B, H, L, D]; key/value [B, Hkv, L, D]."""
    gqa = query.shape[1] != key.shape[1]
    outputs = [
        F.scaled_dot_product_attention(
            query[:, :, block.start : block.end], _select(key, block.keys), _select(value, block.keys),
            attn_mask=block.mask, scale=scaling, enable_gqa=gqa,
        )
        for block in plan.blocks
    ]
    return torch.cat(outputs, dim=2)


def _flex_block_mask(subtree_end: torch.Tensor):
    from torch.nn.attention.flex_attention import create_block_mask

    n = subtree_end.shape[0]

    def tree_mask(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx < subtree_end[kv_idx])

    return create_block_mask(tree_mask, B=None, H=None, Q_LEN=n, KV_LEN=n, device=subtree_end.device)


_compiled_flex = None


def flex_tree_attention(query, key, value, plan: TreeAttentionPlan, scaling: float) -> torch.Tensor:
    global _compiled_flex
    from torch.nn.attention.flex_attention import flex_attention

    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex(
        query, key, value, block_mask=plan.block_mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )


def gyre_tree_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """HF attention interface: [B, H, L, D] in, [B, L, H, D] out."""
    if not isinstance(attention_mask, TreeAttentionPlan):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    plan = attention_mask
    scaling = scaling if scaling is not None else query.shape[-1] ** -0.5
    if plan.backend == "block":
        out = block_tree_attention(query, key, value, plan, scaling)
    elif plan.backend == "flex":
        out = flex_tree_attention(query, key, value, plan, scaling)
    else:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=plan.dense_mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
        )
    return out.transpose(1, 2).contiguous(), None


_registered = False


def register_tree_attention() -> str:
    """Register ``gyre_tree`` with transformers' attention interface (idempotent); returns the name."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface

        AttentionInterface.register("gyre_tree", gyre_tree_attention)
        try:
            from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

            ALL_MASK_ATTENTION_FUNCTIONS.register("gyre_tree", sdpa_mask)
        except ImportError:  # older transformers without a mask interface
            pass
        _registered = True
    return "gyre_tree"
