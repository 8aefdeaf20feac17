"""Parked sessions: idle KV caches moved out of an engine's KV budget into bounded host memory.

A session waiting on a tool needs no KV on the accelerator; parking moves its cache to host memory so the
budget serves other sessions, and its next call takes it back. Host memory is bounded too (``max_bytes``):
to fit a cache the least recently parked ones are dropped (an ended session's parked cache ages out this
way), and a cache larger than the whole store is dropped itself. A dropped session's next call recomputes
its context; the store remembers how many tokens that is, so the engine can count them.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from gyre.rollout.kv_store import SessionKV


def kv_bytes(entry: SessionKV) -> int:
    """Bytes of a cache's key and value tensors."""
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in entry.layers)


def on_device(entry: SessionKV, device: str | torch.device) -> SessionKV:
    """The cache with its tensors on ``device`` (no copy where they already are: a CPU engine's host memory
    is its KV memory, so there parking only takes the cache out of the budget)."""
    layers = [(k.to(device), v.to(device)) for k, v in entry.layers]
    return SessionKV(list(entry.tokens), layers, entry.weight_version, entry.imported, dict(entry.meta))


class ParkedStore:
    """Parked caches (already on host) in parking order, within ``max_bytes``."""

    #: How many dropped sessions' cache lengths are remembered (to count what their next call recomputes).
    REMEMBERED_DROPS = 65_536

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_parked_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[SessionKV, int]] = OrderedDict()
        self._dropped: OrderedDict[str, int] = OrderedDict()  # session -> tokens its dropped cache held
        self.total_bytes = 0
        self.total_tokens = 0
        self.drops = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._entries

    def fits(self, nbytes: int) -> bool:
        """Whether a cache of ``nbytes`` can be held at all (else it is dropped, not moved)."""
        return nbytes <= self.max_bytes

    def put(self, session_id: str, entry: SessionKV, nbytes: int) -> None:
        """Hold ``entry`` (``fits(nbytes)``), dropping the least recently parked caches to make room."""
        if not self.fits(nbytes):
            raise ValueError(f"a parked cache of {nbytes} bytes cannot fit max_parked_bytes={self.max_bytes}")
        self.forget(session_id)
        while self._entries and self.total_bytes + nbytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self.drop(oldest, len(self._remove(oldest)))
        self._entries[session_id] = (entry, nbytes)
        self.total_bytes += nbytes
        self.total_tokens += len(entry)

    def get(self, session_id: str) -> SessionKV | None:
        held = self._entries.get(session_id)
        return held[0] if held is not None else None

    def take(self, session_id: str) -> SessionKV | None:
        """Remove and return a parked cache (its session's call is about to use it)."""
        return self._remove(session_id) if session_id in self._entries else None

    def drop(self, session_id: str, tokens: int) -> None:
        """Record that a session's cache of ``tokens`` was dropped instead of held (its next call recomputes)."""
        self._dropped[session_id] = tokens
        self._dropped.move_to_end(session_id)
        while len(self._dropped) > self.REMEMBERED_DROPS:
            self._dropped.popitem(last=False)
        self.drops += 1

    def dropped_tokens(self, session_id: str) -> int:
        """Tokens the session's dropped parked cache held (0 if none), forgotten once asked."""
        return self._dropped.pop(session_id, 0)

    def forget(self, session_id: str) -> None:
        """Discard whatever is held or remembered for the session (e.g. a cache imported for it replaces it)."""
        if session_id in self._entries:
            self._remove(session_id)
        self._dropped.pop(session_id, None)

    def clear(self) -> None:
        self._entries.clear()
        self._dropped.clear()
        self.total_bytes = self.total_tokens = 0

    def _remove(self, session_id: str) -> SessionKV:
        entry, nbytes = self._entries.pop(session_id)
        self.total_bytes -= nbytes
        self.total_tokens -= len(entry)
        return entry
