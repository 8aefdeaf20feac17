"""Tree attention backends. The single rule: key k is visible to query q iff ``k <= q < subtree_end[k]``.

- ``dense``: the reference. A [L, L] bool mask through SDPA; memory and time grow with L squared.
- ``block`` (CPU default): the preorder rows are cut into chains (a new block wherever a sibling branch
  begins, and every ``block_size`` rows). A chain's rows all see exactly the ancestors of its first row
  plus the chain itself causally, so each block runs two fused flash kernels, merged by log-sum-exp: the
  ancestors unmasked and its own rows in the kernel's causal mode. No mask exists at all; sibling subtrees
  are never touched, so the attention computed is the tree's own ancestor area (plus nothing), not the
  packed length squared. Ancestors are a zero-copy slice of K/V when contiguous, else a gather. The kernels
  keep only a log-sum-exp per row for backward: memory stays linear in the packed length.
- ``flex`` (CUDA default): compiled ``flex_attention`` with a ``BlockMask`` built from ``subtree_end``.

A backend is chosen by handing the model a ``TreeAttentionPlan`` as its mask (see ``gyre.ops.forward``);
the attention function registered as ``gyre_tree`` dispatches on it and falls back to plain SDPA for
ordinary calls, so one model serves tree-packed and normal forwards.

Chunked training (``gyre.ops.chunked``) runs a plan whose first ``query_start`` rows are not fed to the
model: they are ancestors computed by an earlier chunk, and their keys/values come in ``past`` (one pair per
layer, put in front of the chunk's own). The attention call also hands each layer's own keys/values back
through ``captured`` so that later chunks can attend to them.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

BACKENDS = ("auto", "dense", "block", "flex")
# Longest chain block of the block backend. The attention area does not depend on it; the kernel calls and
# prefix gathers do (4096 rows: ~0.8x the step time of 256 on the tree_training benchmark).
DEFAULT_BLOCK_SIZE = 4096


def dense_tree_mask(subtree_end: torch.Tensor) -> torch.Tensor:
    """[L, L] bool, True where query (row) may attend key (column)."""
    n = subtree_end.shape[0]
    index = torch.arange(n, device=subtree_end.device)
    q, k = index[:, None], index[None, :]
    return (k <= q) & (q < subtree_end[None, :])


class LayerKVCapture:
    """Where each layer of a forward leaves its own keys and values, by layer index. A plain object, not a
    dict: FSDP2 rebuilds the dicts and dataclasses it finds in a unit's inputs (to hook the tensors among
    them), so a dict here would be a different one in every decoder layer sharded on its own."""

    def __init__(self) -> None:
        self.layers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


@dataclass
class QueryBlock:
    """Rows ``[start, end)``, a chain (each row the child of the one before), and ``prefix``: the ancestors
    of its first row, which are ancestors of every row of the block. So the block's attention is exactly
    "all of ``prefix``" plus "causal over its own rows": two fused kernels, no mask at all."""

    start: int
    end: int
    prefix: torch.Tensor | tuple[int, int] | None  # a contiguous range (zero-copy view) or gathered indices

    @property
    def prefix_len(self) -> int:
        if self.prefix is None:
            return 0
        return self.prefix[1] - self.prefix[0] if isinstance(self.prefix, tuple) else int(self.prefix.shape[0])


@dataclass
class TreeAttentionPlan:
    """Everything a tree attention call needs, computed once per micro-batch and shared by all layers.

    Rows ``[query_start, len(subtree_end))`` are the model's input; rows before ``query_start`` are cached
    ancestors whose keys/values ``past[layer]`` supplies (``[B, kv_heads, query_start, head_dim]``). When
    ``captured`` is a ``LayerKVCapture``, each layer stores its own ``(key, value)`` there (graph tensors, not
    copies)."""

    subtree_end: torch.Tensor
    backend: str
    blocks: list[QueryBlock] = field(default_factory=list)
    block_mask: Any = None  # flex BlockMask
    dense_mask: torch.Tensor | None = None
    query_start: int = 0
    past: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    captured: LayerKVCapture | None = None

    @property
    def attended_pairs(self) -> int:
        """Query-key pairs computed: the attention cost actually paid (block backend; a causal part pays
        its lower triangle)."""
        return sum((b.end - b.start) * b.prefix_len + (b.end - b.start) * (b.end - b.start + 1) // 2
                   for b in self.blocks)


def resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"trainer.attention_backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "flex" if device.type == "cuda" else "block"
    if backend == "block" and device.type != "cpu":
        # its kernels are PyTorch's CPU flash attention (forward and backward with the log-sum-exp)
        raise ValueError(f"trainer.attention_backend=block runs on CPU only; on {device.type} use flex (or auto)")
    return backend


def make_plan(
    subtree_end: torch.Tensor, backend: str = "auto", block_size: int = DEFAULT_BLOCK_SIZE, query_start: int = 0
) -> TreeAttentionPlan:
    """The attention plan of rows ``[query_start, n)`` of a preorder layout against all its ``n`` keys."""
    backend = resolve_backend(backend, subtree_end.device)
    n = subtree_end.shape[0]
    if not 0 <= query_start < n:
        raise ValueError(f"query_start must be in [0, {n}) for a layout of {n} rows, got {query_start}")
    plan = TreeAttentionPlan(subtree_end=subtree_end, backend=backend, query_start=query_start)
    if backend == "dense":
        plan.dense_mask = dense_tree_mask(subtree_end)[query_start:]
    elif backend == "block":
        plan.blocks = _query_blocks(subtree_end, block_size, query_start)
    else:
        plan.block_mask = _flex_block_mask(subtree_end, query_start)
    return plan


def _query_blocks(subtree_end: torch.Tensor, block_size: int, query_start: int = 0) -> list[QueryBlock]:
    """Cut the preorder rows from ``query_start`` on into chains: a new block starts where a row is not the
    child of the row before it (a sibling branch begins: ``subtree_end[k - 1] <= k``) or the block is full."""
    n = subtree_end.shape[0]
    index = torch.arange(n, device=subtree_end.device)
    branch_starts = (subtree_end[:-1] <= index[1:]).nonzero().flatten().add(1).tolist()
    cuts = sorted({query_start, n, *(start for start in branch_starts if start > query_start)})
    blocks = []
    for run_start, run_end in zip(cuts, cuts[1:]):
        for start in range(run_start, run_end, block_size):
            end = min(start + block_size, run_end)
            ancestors = index[:start][subtree_end[:start] > start]
            prefix: torch.Tensor | tuple[int, int] | None = None
            if ancestors.numel():
                lo = int(ancestors[0])
                contiguous = ancestors.numel() == start - lo
                prefix = (lo, start) if contiguous else ancestors
            blocks.append(QueryBlock(start, end, prefix))
    return blocks


def _select(tensor: torch.Tensor, keys: torch.Tensor | tuple[int, int]) -> torch.Tensor:
    if isinstance(keys, tuple):
        return tensor[:, :, keys[0] : keys[1]]
    return tensor.index_select(2, keys)


_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def _block_forward(q, k_prefix, v_prefix, k_own, v_own, scale):
    """softmax over (all prefix keys ∪ causal own keys), as two fused kernels merged by log-sum-exp."""
    out, lse = _flash(q, k_own, v_own, 0.0, True, scale=scale)
    if k_prefix is not None:
        out_p, lse_p = _flash(q, k_prefix, v_prefix, 0.0, False, scale=scale)
        merged = torch.logaddexp(lse_p, lse)
        out = out_p * torch.exp(lse_p - merged).unsqueeze(-1) + out * torch.exp(lse - merged).unsqueeze(-1)
        out = out.to(q.dtype)  # the log-sum-exp is float32: bfloat16 parts came back float32
        lse = merged
    return out, lse


class _BlockTreeAttention(torch.autograd.Function):
    """Every chain block of a plan in one autograd node.

    Backward runs the flash backward of each block's two parts with the block's *merged* output and
    log-sum-exp, which gives exactly each part's share of dQ and its own dK, dV (as split-KV and ring
    attention do), and adds them in place into one dQ, dK, dV. (One node per block instead made every
    block's slice and gather of K/V a full-length gradient in backward: time grew with blocks x length,
    which is what a micro-batch of many branching trees has.)"""

    @staticmethod
    def forward(ctx, query, key, value, blocks, query_start, scale):
        outs, lses = [], []
        for block in blocks:
            q = query[:, :, block.start - query_start:block.end - query_start].contiguous()
            k_prefix = v_prefix = None
            if block.prefix is not None:
                k_prefix, v_prefix = _select(key, block.prefix).contiguous(), _select(value, block.prefix).contiguous()
            out, lse = _block_forward(q, k_prefix, v_prefix, key[:, :, block.start:block.end].contiguous(),
                                      value[:, :, block.start:block.end].contiguous(), scale)
            outs.append(out)
            lses.append(lse)
        out, lse = torch.cat(outs, dim=2), torch.cat(lses, dim=2)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.blocks, ctx.query_start, ctx.scale = blocks, query_start, scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        query, key, value, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
        for block in ctx.blocks:
            rows = slice(block.start, block.end)
            query_rows = slice(block.start - ctx.query_start, block.end - ctx.query_start)
            q, g = query[:, :, query_rows].contiguous(), grad_out[:, :, query_rows].contiguous()
            o, l = out[:, :, query_rows].contiguous(), lse[:, :, query_rows].contiguous()
            dq_b, dk_own, dv_own = _flash_backward(g, q, key[:, :, rows].contiguous(), value[:, :, rows].contiguous(),
                                                   o, l, 0.0, True, scale=ctx.scale)
            dk[:, :, rows] += dk_own
            dv[:, :, rows] += dv_own
            if block.prefix is not None:
                k_prefix, v_prefix = _select(key, block.prefix).contiguous(), _select(value, block.prefix).contiguous()
                dq_p, dk_p, dv_p = _flash_backward(g, q, k_prefix, v_prefix, o, l, 0.0, False, scale=ctx.scale)
                dq_b = dq_b + dq_p
                if isinstance(block.prefix, tuple):
                    dk[:, :, block.prefix[0]:block.prefix[1]] += dk_p
                    dv[:, :, block.prefix[0]:block.prefix[1]] += dv_p
                else:
                    dk.index_add_(2, block.prefix, dk_p.to(dk.dtype))
                    dv.index_add_(2, block.prefix, dv_p.to(dv.dtype))
            dq[:, :, query_rows] = dq_b
        return dq, dk, dv, None, None, None


def block_tree_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, plan: TreeAttentionPlan, scaling: float
) -> torch.Tensor:
    """Each chain block against exactly the keys it can see. query [B, H, L - query_start, D] (the plan's
    query rows); key/value [B, Hkv, L, D] (every row of the layout)."""
    return _BlockTreeAttention.apply(query, key, value, plan.blocks, plan.query_start, scaling)


FLEX_ALIGN = 128  # flex_attention's block size: lengths padded to it (no partial blocks, fewer shapes)


def _round_up(length: int) -> int:
    return -(-length // FLEX_ALIGN) * FLEX_ALIGN


def _flex_block_mask(subtree_end: torch.Tensor, query_start: int = 0):
    """The tree mask of rows ``[query_start, n)`` against ``n`` keys, both padded to FLEX_ALIGN. A padded row
    is a leaf of its own that sees only itself: every real row is before it, so none sees it, and no padded
    query row is left with no key at all (a fully masked row is where flex's backward has given NaN)."""
    from torch.nn.attention.flex_attention import create_block_mask

    n = subtree_end.shape[0]
    q_len = _round_up(n - query_start)
    kv_len = _round_up(query_start + q_len)
    padded_end = torch.cat([subtree_end, torch.arange(n + 1, kv_len + 1, device=subtree_end.device)])

    def tree_mask(b, h, q_idx, kv_idx):
        row = q_idx + query_start
        return (kv_idx <= row) & (row < padded_end[kv_idx])

    return create_block_mask(tree_mask, B=None, H=None, Q_LEN=q_len, KV_LEN=kv_len, device=subtree_end.device)


_compiled_flex: dict[str, Any] = {}


def flex_tree_attention(query, key, value, plan: TreeAttentionPlan, scaling: float) -> torch.Tensor:
    """flex_attention, compiled (uncompiled it materialises the whole score matrix: n^2 memory). On CUDA it is
    compiled with automatic dynamic shapes: the first new length recompiles once with symbolic lengths, which
    every later length reuses. (``dynamic=False`` compiled one kernel per length, and past dynamo's recompile
    limit of 8 fell back to the uncompiled path without an error: a 60K-token tree then asked the GPU for
    55 GiB.) On CPU, where flex is a forward-only reference (no backward there; ``block`` trains), lengths
    stay static: inductor's CPU flex template fails to build with symbolic lengths past ~768 rows (torch 2.13)."""
    from torch.nn.attention.flex_attention import flex_attention

    device = query.device.type
    if device not in _compiled_flex:
        _compiled_flex[device] = torch.compile(flex_attention, dynamic=None if device == "cuda" else False)
    q_len, kv_len = plan.block_mask.seq_lengths
    rows = query.shape[2]
    # Contiguous, so strides follow the (symbolic) lengths: a whole tree's key is a transposed view, a chunk's
    # is concatenated with the past; strides differing by call recompiled every chunk on the H200.
    query = F.pad(query, (0, 0, 0, q_len - rows)).contiguous()
    key, value = (F.pad(t, (0, 0, 0, kv_len - t.shape[2])).contiguous() for t in (key, value))
    # On a GPU running out of compiles must be an error, not a silent fall back to n^2 memory.
    guard = nullcontext()
    if device == "cuda":  # (the switch was named fail_on_cache_limit_hit before torch 2.7)
        config = torch._dynamo.config
        name = "fail_on_recompile_limit_hit" if hasattr(config, "fail_on_recompile_limit_hit") else "fail_on_cache_limit_hit"
        guard = config.patch(name, True)
    with guard:
        out = _compiled_flex[device](
            query, key, value, block_mask=plan.block_mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
        )
    return out[:, :, :rows]


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
    if plan.captured is not None:
        plan.captured.layers[module.layer_idx] = (key, value)
    if plan.past is not None:
        past_key, past_value = plan.past[module.layer_idx]
        key, value = torch.cat([past_key, key], dim=2), torch.cat([past_value, value], dim=2)
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
