"""Forward passes of a transformers causal LM over per-session KV caches that the engine owns.

Each running session has a ``RowCache``: per-layer key/value buffers with spare room at the end, so a
decode step writes its one new token in place (no copy of the cache per step; the buffers grow by
doubling). The model runs with a small registered attention function (``rollout_rows``) instead of a
transformers ``Cache``: projections, MLPs and the LM head run batched over all rows, and attention runs
row by row against that row's own buffer, so there is no padding and no stacking of caches, and each
row's attention is exactly what it would be alone. This matters for agent sessions, whose contexts are
long and of very different lengths: a left-padded batch would copy every cache each step and spend
attention on the padding.

Two call shapes: one row feeding a run of prompt tokens (prefill, causal within the run), or many rows
feeding one token each (decode). The cost is one small attention call per row and layer, cheap on CPU;
on GPU with many sessions prefer the vLLM engine.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F

from gyre.rollout.kv_store import LayerKV

ATTENTION_NAME = "rollout_rows"
_registered = False


class RowCache:
    """One session's KV cache while a call runs: ``length`` tokens in ``keys[l][:, :length]`` (and
    ``values``), each buffer ``[kv_heads, capacity, head_dim]``."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], length: int) -> None:
        self.keys = keys
        self.values = values
        self.length = length

    @property
    def capacity(self) -> int:
        return int(self.keys[0].shape[1])

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more tokens (doubling), copying what is cached once."""
        needed = self.length + extra
        if needed <= self.capacity:
            return
        capacity = max(needed, 2 * self.capacity, 64)
        for buffers in (self.keys, self.values):
            for layer, old in enumerate(buffers):
                new = old.new_empty(old.shape[0], capacity, old.shape[2])
                new[:, : self.length] = old[:, : self.length]
                buffers[layer] = new

    def layers(self) -> list[LayerKV]:
        """The cached tokens per layer (views into the buffers)."""
        return [(k[:, : self.length], v[:, : self.length]) for k, v in zip(self.keys, self.values, strict=True)]


def rows_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    rollout_rows: list[RowCache] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention for ``rollout_rows``: append each row's new keys/values at its ``length`` and attend
    over its own buffer. ``query`` is ``[B, heads, q, head_dim]``; returns ``[B, q, heads, head_dim]``."""
    if rollout_rows is None:
        raise RuntimeError("the rollout_rows attention needs rollout_rows=[RowCache, ...] in the forward call")
    layer = module.layer_idx
    steps = query.shape[2]
    outputs = []
    for row, cache in enumerate(rollout_rows):
        start = cache.length
        cache.keys[layer][:, start : start + steps] = key[row]
        cache.values[layer][:, start : start + steps] = value[row]
        keys = cache.keys[layer][None, :, : start + steps]
        values = cache.values[layer][None, :, : start + steps]
        mask = None
        if steps > 1 and start > 0:  # causal within the new run, everything cached before it visible
            positions = torch.arange(start + steps, device=query.device)
            mask = positions[None, :] <= (start + torch.arange(steps, device=query.device))[:, None]
        outputs.append(
            F.scaled_dot_product_attention(
                query[row : row + 1],
                keys,
                values,
                attn_mask=mask,
                is_causal=steps > 1 and start == 0,
                scale=scaling,
                enable_gqa=query.shape[1] != keys.shape[1],
            )
        )
    return torch.cat(outputs).transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    global _registered
    if not _registered:
        from transformers import AttentionInterface

        AttentionInterface.register(ATTENTION_NAME, rows_attention)
        _registered = True


class HFRunner:
    """Owns the model (switched to the ``rollout_rows`` attention) and runs forwards over ``RowCache``s.
    Not thread-safe: one caller (the engine thread) at a time."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.config = model.config
        # Device and dtype are read from this parameter: walking model.parameters() on every call cost
        # ~0.1 ms per call at 256 concurrent calls; the Parameter object outlives sleep/wake's data swaps.
        self._first_parameter = next(model.parameters())
        text = self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        layer_types = set(getattr(text, "layer_types", None) or ["full_attention"])
        if layer_types != {"full_attention"} or getattr(text, "use_sliding_window", False):
            raise NotImplementedError(
                f"HFEngine supports full-attention decoders only; this model has layer types {sorted(layer_types)}: "
                "use the vllm engine"
            )
        self.num_layers: int = text.num_hidden_layers
        self.num_kv_heads: int = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        self.head_dim: int = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        self.vocab_size: int = int(self.model.get_output_embeddings().weight.shape[0])
        self.max_positions: int = int(getattr(text, "max_position_embeddings", 2**31 - 1))
        if "logits_to_keep" not in inspect.signature(self.model.forward).parameters:
            raise NotImplementedError(f"{type(model).__name__}.forward has no logits_to_keep; HFEngine needs it")
        _register_attention()
        if hasattr(self.model, "set_attn_implementation"):
            self.model.set_attn_implementation(ATTENTION_NAME)
        else:  # older transformers
            self.config._attn_implementation = ATTENTION_NAME

    @property
    def device(self) -> torch.device:
        return self._first_parameter.device

    @property
    def dtype(self) -> torch.dtype:
        return self._first_parameter.dtype

    def new_row(self, layers: list[LayerKV] | None = None) -> RowCache:
        """A running cache holding ``layers`` (adopted without copying; the first append reallocates)."""
        if layers:
            return RowCache([k for k, _ in layers], [v for _, v in layers], int(layers[0][0].shape[1]))
        empty = [
            torch.empty(self.num_kv_heads, 0, self.head_dim, dtype=self.dtype, device=self.device)
            for _ in range(2 * self.num_layers)
        ]
        return RowCache(empty[: self.num_layers], empty[self.num_layers :], 0)

    @torch.no_grad()
    def forward(self, rows: list[RowCache], tokens: list[list[int]]) -> torch.Tensor:
        """Feed ``tokens[i]`` after row ``i``'s cache (all runs the same length: one row with a prompt
        piece, or many rows with one token each); extend the caches; return last-position logits
        ``[B, V]`` in float32."""
        steps = len(tokens[0])
        if any(len(run) != steps for run in tokens):
            raise ValueError("rows in one forward must feed the same number of tokens")
        device = self.device
        for row in rows:
            row.reserve(steps)
        input_ids = torch.tensor(tokens, dtype=torch.long, device=device)
        offsets = torch.tensor([row.length for row in rows], dtype=torch.long, device=device)
        positions = offsets[:, None] + torch.arange(steps, device=device)[None, :]
        out = self.model(
            input_ids=input_ids,
            position_ids=positions,
            use_cache=False,
            logits_to_keep=1,
            rollout_rows=rows,
        )
        for row in rows:
            row.length += steps
        return out.logits[:, -1].float()
