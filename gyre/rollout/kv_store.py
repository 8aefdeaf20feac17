"""Per-session KV caches kept between calls, bounded by a token budget with LRU eviction.

An agent session appends to the same prompt turn after turn; keeping its KV cache means the next call
only prefills the new suffix. The store holds *idle* sessions; a session's cache moves out of the store
while a call on it runs and comes back when the call ends.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch

LayerKV = tuple[torch.Tensor, torch.Tensor]


@dataclass
class SessionKV:
    """The KV cache of one session.

    ``layers`` holds one ``(key, value)`` pair per decoder layer, each ``[kv_heads, len(tokens), head_dim]``.
    ``weight_version`` is the oldest weight version that produced any part of it (a cache is stale when
    that differs from the engine's current version). ``imported`` marks a cache that came from another
    engine and is verified strictly (exact prefix, same version) on its first use.
    """

    tokens: list[int]
    layers: list[LayerKV]
    weight_version: int
    imported: bool = False
    meta: dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)

    def truncated(self, length: int) -> SessionKV:
        """The cache of the first ``length`` tokens (views, no copy)."""
        if length >= len(self.tokens):
            return self
        layers = [(k[:, :length], v[:, :length]) for k, v in self.layers]
        return SessionKV(self.tokens[:length], layers, self.weight_version, self.imported, dict(self.meta))

    def compacted(self) -> SessionKV:
        """Copies of any tensors that are views into larger storage (a batch), so storing this entry
        does not keep a whole decode batch alive."""
        return SessionKV(
            list(self.tokens),
            [(_compact(k), _compact(v)) for k, v in self.layers],
            self.weight_version,
            self.imported,
            dict(self.meta),
        )


def _compact(tensor: torch.Tensor) -> torch.Tensor:
    needed = tensor.numel() * tensor.element_size()
    if tensor.is_contiguous() and tensor.untyped_storage().nbytes() == needed:
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)


class SessionStore:
    """Idle session caches in least-recently-used order, within ``max_tokens`` together with the tokens
    held by running calls (``reserved`` in ``put``/``evict``): running caches cannot be evicted, idle ones
    can."""

    #: How many evicted sessions' cache lengths are remembered (to count what their next call recomputes).
    REMEMBERED_EVICTIONS = 65_536

    def __init__(self, max_tokens: int) -> None:
        if max_tokens < 0:
            raise ValueError(f"max_cached_tokens must be >= 0, got {max_tokens}")
        self.max_tokens = max_tokens
        self._entries: OrderedDict[str, SessionKV] = OrderedDict()
        self._evicted: OrderedDict[str, int] = OrderedDict()  # session -> tokens its evicted cache held
        self.total_tokens = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._entries

    def get(self, session_id: str) -> SessionKV | None:
        return self._entries.get(session_id)

    def take(self, session_id: str) -> SessionKV | None:
        """Remove and return a session's cache (a call is about to use and extend it)."""
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self.total_tokens -= len(entry)
        return entry

    def put(self, session_id: str, entry: SessionKV, reserved: int = 0) -> None:
        """Store ``entry`` as the most recent, then evict least-recent entries to fit the budget.

        An entry too large to fit even alone is dropped rather than kept over the bound.
        """
        self.take(session_id)
        self._entries[session_id] = entry
        self.total_tokens += len(entry)
        self.evict(reserved)

    def evict(self, reserved: int = 0) -> int:
        """Drop least-recent entries until ``total_tokens + reserved <= max_tokens``; return how many."""
        dropped = 0
        while self._entries and self.total_tokens + reserved > self.max_tokens:
            session_id, entry = self._entries.popitem(last=False)
            self.total_tokens -= len(entry)
            self._evicted[session_id] = len(entry)
            self._evicted.move_to_end(session_id)
            dropped += 1
        while len(self._evicted) > self.REMEMBERED_EVICTIONS:
            self._evicted.popitem(last=False)
        self.evictions += dropped
        return dropped

    def evicted_tokens(self, session_id: str) -> int:
        """Tokens the session's last evicted cache held (0 if none), forgotten once asked."""
        return self._evicted.pop(session_id, 0)

    def clear(self) -> None:
        self._entries.clear()
        self.total_tokens = 0

    def session_ids(self) -> list[str]:
        return list(self._entries)
