"""Token sequences that share their prefix with the sequence they extend.

An agent's call ``n`` is, token for token, call ``n - 1``'s prompt and response plus a few new tokens. A
``TokenSeq`` holds only those new tokens (int32) and a link to the sequence it extends, so the proxy's call
history costs memory per new token, an extension costs time per new token, and the record writer can see
from the link which earlier call a prompt continues (``parent.label``). It reads as an ordinary
``Sequence[int]``; ``to_numpy`` / ``tolist`` flatten it (time and memory per token of the whole sequence),
and pickling sends it flat.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

_INT32_MAX = np.iinfo(np.int32).max


class TokenSeq(Sequence[int]):
    """An immutable token sequence: ``parent`` (shared, may be None) followed by its own tokens ``own``."""

    __slots__ = ("_high", "_low", "label", "length", "own", "parent")

    def __init__(self, own: np.ndarray, parent: TokenSeq | None = None, label: str | None = None) -> None:
        self.own = own
        self.parent = parent
        self.label = label  # e.g. the id of the call whose prompt + response this sequence is
        self.length = (parent.length if parent is not None else 0) + int(own.shape[0])
        low = int(own.min()) if own.size else None
        high = int(own.max()) if own.size else None
        if parent is not None and parent.length:
            low = parent._low if low is None else min(low, parent._low)  # type: ignore[type-var]
            high = parent._high if high is None else max(high, parent._high)  # type: ignore[type-var]
        self._low, self._high = low, high

    @classmethod
    def of(cls, ids: Iterable[int], parent: TokenSeq | None = None, label: str | None = None) -> TokenSeq:
        """A sequence of ``ids`` after ``parent``. Ids must be ints in [0, 2**31)."""
        own = np.asarray(ids if isinstance(ids, (np.ndarray, list, tuple)) else list(ids), dtype=np.int64)
        if own.ndim != 1:
            raise ValueError(f"token ids must be a flat sequence, got shape {own.shape}")
        if own.size and (own.min() < 0 or own.max() > _INT32_MAX):
            bad = own[(own < 0) | (own > _INT32_MAX)][0]
            raise ValueError(f"token id {int(bad)} is out of range for a token sequence")
        return cls(own.astype(np.int32), parent, label)

    def extend(self, ids: Iterable[int], label: str | None = None) -> TokenSeq:
        """This sequence followed by ``ids`` (this one is shared, not copied)."""
        return TokenSeq.of(ids, self, label)

    def bounds(self) -> tuple[int, int] | None:
        """(smallest, largest) token id, without reading the tokens (None when empty): enough to check a
        prompt against a vocabulary in time independent of its length."""
        return None if self._low is None else (self._low, self._high)  # type: ignore[return-value]

    def segments(self) -> list[np.ndarray]:
        """The own-token arrays from the root on."""
        parts: list[np.ndarray] = []
        node: TokenSeq | None = self
        while node is not None:
            if node.own.size:
                parts.append(node.own)
            node = node.parent
        parts.reverse()
        return parts

    def to_numpy(self) -> np.ndarray:
        parts = self.segments()
        return np.concatenate(parts) if parts else np.zeros(0, np.int32)

    def tolist(self) -> list[int]:
        return self.to_numpy().tolist()

    def starts_with(self, prefix: TokenSeq) -> bool:
        """True if ``prefix`` is this sequence or one it extends (by identity, no token is read)."""
        node: TokenSeq | None = self
        while node is not None and node.length >= prefix.length:
            if node is prefix:
                return True
            node = node.parent
        return False

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[int]:
        for part in self.segments():
            yield from part.tolist()

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return self.to_numpy()[index].tolist()
        if index < 0:
            index += self.length
        if not 0 <= index < self.length:
            raise IndexError("token index out of range")
        node: TokenSeq = self
        while True:
            start = node.length - int(node.own.shape[0])
            if index >= start:
                return int(node.own[index - start])
            assert node.parent is not None
            node = node.parent

    def __add__(self, other: Sequence[int]) -> list[int]:
        """Concatenation gives a plain list, as it would for the list this sequence stands for."""
        return self.tolist() + list(other)

    def __radd__(self, other: Sequence[int]) -> list[int]:
        return list(other) + self.tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenSeq):
            return other is self or (other.length == self.length and np.array_equal(self.to_numpy(), other.to_numpy()))
        if isinstance(other, (list, tuple, np.ndarray)):
            return len(other) == self.length and np.array_equal(self.to_numpy(), np.asarray(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.to_numpy().tobytes())

    def __repr__(self) -> str:
        return f"TokenSeq(len={self.length}, own={int(self.own.shape[0])}, label={self.label!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TokenSeq.of, (self.to_numpy(), None, self.label))

