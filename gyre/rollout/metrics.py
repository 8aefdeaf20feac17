"""Counters and a throughput meter shared by the engines, read by ``stats()`` from any thread."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass


@dataclass
class EngineCounters:
    """Monotonic counters; written by the engine's own thread, read anywhere (ints are atomic in CPython)."""

    prompt_tokens: int = 0  # prompt tokens of admitted calls
    prefix_hit_tokens: int = 0  # of those, served from a session's (own or imported) cache
    generated_tokens: int = 0
    kv_import_fallbacks: int = 0  # imported caches that could not be used (tokens/version mismatch, no tensors)
    stale_recomputes: int = 0  # caches recomputed because the weights changed since they were made
    recomputed_tokens: int = 0  # cached tokens fed again because their cache was evicted or preempted
    preemptions: int = 0  # running calls whose cache was dropped to keep within max_cached_tokens
    calls_finished: int = 0
    calls_aborted: int = 0
    # Parking (``park``): idle caches moved out of the KV budget to host memory, or dropped when it is full.
    parks: int = 0  # sessions parked (their cache left the budget, held on host or dropped)
    park_bytes_to_host: int = 0  # bytes of the caches moved to host
    restores: int = 0  # parked sessions whose next call took their cache back from host
    restore_bytes_from_host: int = 0  # bytes moved back (the part of the cache the call reused)
    restore_transfer_s: float = 0.0  # seconds spent moving them back
    park_recomputed_tokens: int = 0  # tokens fed again because a parked cache had been dropped
    restore_recompute_s: float = 0.0  # forward seconds spent on those tokens (their share of each prefill piece)

    @property
    def prefix_hit_rate(self) -> float:
        return self.prefix_hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class ThroughputMeter:
    """Generated tokens per second over the busy time of the last ``window_s`` seconds.

    Each record is a span of work and the tokens it produced; spans may overlap (per-request spans in
    the vLLM adapter), so busy time is the length of their union. Measured over busy time only, an
    engine that was idle and then served a burst reports the burst's rate, not one diluted by idling.
    """

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._events: deque[tuple[float, float, int]] = deque()
        self._lock = threading.Lock()

    def record(self, start: float, end: float, tokens: int) -> None:
        with self._lock:
            self._events.append((start, end, tokens))
            self._trim(end)

    def rate(self, now: float | None = None) -> float:
        now = time.perf_counter() if now is None else now
        with self._lock:
            self._trim(now)
            if not self._events:
                return 0.0
            events = sorted(self._events)
        tokens = sum(n for _, _, n in events)
        busy, covered_to = 0.0, float("-inf")
        for start, end, _ in events:  # length of the union of the spans (concurrent requests overlap)
            start = max(start, covered_to)
            if end > start:
                busy += end - start
                covered_to = end
        return tokens / busy if busy > 0 else 0.0

    def _trim(self, now: float) -> None:
        while self._events and self._events[0][1] < now - self.window_s:
            self._events.popleft()
