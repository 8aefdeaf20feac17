"""The token-in, token-out protocol every rollout engine implements (``hf`` embedded, ``vllm``).

The proxy only ever sends token IDs and gets token IDs back with the sampled tokens' log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "abort"]


class PromptTooLongError(ValueError):
    """The prompt (plus at least one new token) does not fit the engine's context; never truncated."""


class SamplingError(ValueError):
    """A sampling parameter is out of range; the message names it."""


class InvalidTokenError(SamplingError):
    """A token id (prompt or stop id) outside the model's vocabulary, or an empty prompt.

    A ``SamplingError`` so that callers mapping bad request input to an HTTP 400 catch one type.
    """


class EngineAsleepError(RuntimeError):
    """A call reached an engine that is asleep (weights freed for training) or closed; route elsewhere."""


class CellLostError(RuntimeError):
    """The process serving an engine died (its cell is lost): its sessions' caches are gone with it; route
    the call elsewhere and recompute the prompt there."""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if not (self.temperature >= 0.0):
            raise SamplingError(f"temperature must be >= 0, got {self.temperature}")
        if not (0.0 < self.top_p <= 1.0):
            raise SamplingError(f"top_p must be in (0, 1], got {self.top_p}")
        if not (isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1):
            raise SamplingError(f"max_new_tokens must be an int >= 1, got {self.max_new_tokens!r}")
        if self.seed is not None and not -(2**63) <= self.seed < 2**64:  # what torch.Generator.manual_seed takes
            raise SamplingError(f"seed must fit in 64 bits, got {self.seed}")


@dataclass
class Generation:
    response_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    weight_version: int
    # Engine-side facts for the record: prefix tokens served from cache, timings.
    cached_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class KVState:
    """A session's KV cache, portable between engines of the same model.

    ``tokens`` are the token IDs the cache covers; ``tensors`` holds one (key, value) pair per layer,
    each ``[kv_heads, len(tokens), head_dim]`` on CPU.
    """

    tokens: list[int]
    weight_version: int
    tensors: list[tuple[Any, Any]]
    meta: dict[str, Any] = field(default_factory=dict)


def common_prefix_length(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists (how much of a cache a prompt can reuse).

    Compares slices in C (an agent's cache is usually a prefix of its next prompt: one comparison), halving
    the range where they differ, instead of a Python loop over up to a million tokens."""
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit]:
        return limit
    low, high = 0, limit  # a[:low] == b[:low], and they differ somewhere before high
    while high - low > 64:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    for i in range(low, high):
        if a[i] != b[i]:
            return i
    return high


@runtime_checkable
class RolloutEngine(Protocol):
    weight_version: int

    async def generate(self, session_id: str, prompt_ids: list[int], sampling: SamplingParams) -> Generation: ...

    async def abort(self, session_id: str) -> bool: ...

    async def park(self, session_id: str) -> bool:
        """Free an idle session's KV slot until its next call, which restores it (from host memory, or by
        recomputing its context); outputs are unchanged. True if budget was freed; False if the session is
        busy, holds no cache, or the engine cannot park."""
        ...

    async def end_session(self, session_id: str) -> None:
        """The session's execution ended: free what the engine holds for it (its cache, parked or not)."""
        ...

    async def export_session(self, session_id: str) -> KVState | None: ...

    async def import_session(self, session_id: str, state: KVState) -> None: ...

    async def sleep(self) -> None: ...

    async def wake(self) -> None: ...

    async def load_weights(self, weights: Iterable[tuple[str, Any]], version: int) -> None: ...

    def stats(self) -> dict[str, float]: ...
