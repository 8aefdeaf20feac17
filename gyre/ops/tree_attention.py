"""Tree attention backends. The single rule: key k is visible to query q iff ``k <= q < subtree_end[k]``.

- ``dense``: the reference. A [L, L] bool mask through SDPA; memory and time grow with L squared.
- ``block`` (CPU default): queries are cut into blocks of ``block_size`` preorder rows; a block attends only
  to the keys visible to at least one of its rows (``k < q_end`` and ``subtree_end[k] > q_start``: its
  ancestors and its own rows). Sibling subtrees are never touched, so attention cost follows the tree's
  ancestor area instead of the packed length squared. Each block runs two fused flash kernels merged by
  log-sum-exp: its ancestors (usually visible to every row: no mask at all) and its own rows (the kernel's
  causal mode when they form a chain, which skips the upper triangle). Keys are a zero-copy slice of K/V
  when (nearly) contiguous, else a gather. The kernels keep only a log-sum-exp per row for backward, so no
  attention matrix is stored; masks exist only where a branch point hides some keys from some rows.
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
class KeyPart:
    """Keys one query block attends to in one kernel call: a contiguous range ``(lo, hi)`` (a zero-copy view
    of K/V) or an index tensor (a gather); an additive float mask only when some key is hidden from some
    row; ``causal`` when the part is the block's own rows forming a single chain."""

    keys: torch.Tensor | tuple[int, int]
    mask: torch.Tensor | None = None  # bool [rows, keys], True = visible
    causal: bool = False
    empty_rows: torch.Tensor | None = None  # bool [rows]: rows that see no key of this part
    _additive: dict = field(default_factory=dict, repr=False)  # dtype -> 0/-inf mask, shared by all layers

    def additive_mask(self, dtype: torch.dtype) -> torch.Tensor | None:
        """The fused CPU kernel takes an additive mask in the query's dtype; built once per dtype."""
        if self.mask is None:
            return None
        if dtype not in self._additive:
            self._additive[dtype] = torch.zeros(self.mask.shape, dtype=dtype, device=self.mask.device).masked_fill_(
                ~self.mask, float("-inf"))
        return self._additive[dtype]

    @property
    def num_keys(self) -> int:
        return self.keys[1] - self.keys[0] if isinstance(self.keys, tuple) else int(self.keys.shape[0])


@dataclass
class QueryBlock:
    """Rows ``[start, end)``: their ancestors before the block (``prefix``) and the block itself (``own``).
    The two parts run as separate fused kernels merged by log-sum-exp, so the usually-full ancestor part
    needs no mask and the block's own rows use the kernel's causal mode when they form a chain."""

    start: int
    end: int
    prefix: KeyPart | None
    own: KeyPart

    @property
    def num_keys(self) -> int:
        return (self.prefix.num_keys if self.prefix else 0) + self.own.num_keys


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
        rows = index[start:end, None]
        # The block's own rows: a chain exactly when every row's subtree reaches past the block's end.
        own_ends = subtree_end[start:end]
        if bool((own_ends[:-1] >= end).all()):
            own = KeyPart((start, end), causal=True)
        else:
            own = KeyPart((start, end), mask=(index[None, start:end] <= rows) & (rows < own_ends[None, :]))
        visible = index[:start][subtree_end[:start] > start]  # ancestors reaching into the block
        prefix = None
        if visible.numel():
            lo = int(visible[0])
            if (start - lo) * (1 - _MAX_RANGE_WASTE) <= visible.shape[0]:
                keys, key_index = (lo, start), index[lo:start]
            else:
                keys = key_index = visible
            ends = subtree_end[key_index]
            if bool((ends >= end).all()):
                prefix = KeyPart(keys)  # every row sees every key: no mask
            else:
                mask = rows < ends[None, :]
                prefix = KeyPart(keys, mask=mask, empty_rows=~mask.any(dim=1))
        blocks.append(QueryBlock(start, end, prefix, own))
    return blocks


def _select(tensor: torch.Tensor, keys: torch.Tensor | tuple[int, int]) -> torch.Tensor:
    if isinstance(keys, tuple):
        return tensor[:, :, keys[0] : keys[1]]
    return tensor.index_select(2, keys)


_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


class _TwoPartAttention(torch.autograd.Function):
    """softmax over (prefix keys ∪ own keys) computed as two fused kernels merged by log-sum-exp.

    Backward uses the flash backward of each part with the *merged* output and log-sum-exp, which gives
    exactly each part's share of dQ and its own dK, dV (as in split-KV / ring attention)."""

    @staticmethod
    def forward(ctx, q, k1, v1, m1, empty1, k2, v2, m2, causal2, scale):
        out2, lse2 = _flash(q, k2, v2, 0.0, causal2, attn_mask=m2, scale=scale)
        if k1 is None:
            out, lse = out2, lse2
        else:
            out1, lse1 = _flash(q, k1, v1, 0.0, False, attn_mask=m1, scale=scale)
            if empty1 is not None and bool(empty1.any()):  # the kernel reports 0, not -inf, for such rows
                lse1 = lse1.masked_fill(empty1, float("-inf"))
            lse = torch.logaddexp(lse1, lse2)
            out = out1 * torch.exp(lse1 - lse).unsqueeze(-1) + out2 * torch.exp(lse2 - lse).unsqueeze(-1)
        ctx.save_for_backward(q, k1, v1, m1, k2, v2, m2, out, lse)
        ctx.causal2, ctx.scale, ctx.has_prefix = causal2, scale, k1 is not None
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k1, v1, m1, k2, v2, m2, out, lse = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        dq, dk2, dv2 = _flash_backward(grad_out, q, k2, v2, out, lse, 0.0, ctx.causal2, attn_mask=m2, scale=ctx.scale)
        dk1 = dv1 = None
        if ctx.has_prefix:
            dq1, dk1, dv1 = _flash_backward(grad_out, q, k1, v1, out, lse, 0.0, False, attn_mask=m1, scale=ctx.scale)
            dq = dq + dq1
        return dq, dk1, dv1, None, None, dk2, dv2, None, None, None


def block_tree_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, plan: TreeAttentionPlan, scaling: float
) -> torch.Tensor:
    """Each query block against only the keys it can see. query [B, H, L, D]; key/value [B, Hkv, L, D]."""
    outputs = []
    for block in plan.blocks:
        q = query[:, :, block.start : block.end].contiguous()
        prefix, own = block.prefix, block.own
        k1 = v1 = m1 = empty1 = None
        if prefix is not None:
            k1, v1 = _select(key, prefix.keys).contiguous(), _select(value, prefix.keys).contiguous()
            m1, empty1 = prefix.additive_mask(query.dtype), prefix.empty_rows
        k2, v2 = _select(key, own.keys).contiguous(), _select(value, own.keys).contiguous()
        outputs.append(_TwoPartAttention.apply(
            q, k1, v1, m1, empty1, k2, v2, own.additive_mask(query.dtype), own.causal, scaling))
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
