"""A set of Ray actors called as one: ``group.method(...)`` fans out to every member.

Membership changes at any time (``add`` / ``remove``); a call already issued keeps the members it was issued
to, so removing a member mid-call neither cancels nor loses its result. Dispatch helpers split a batch
across the members and gather the results in order. Knows nothing about RL.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import ray


class WorkerGroup:
    def __init__(self, name: str, members: Sequence[Any] = ()):
        self.name = name
        self._members: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.version = 0  # bumped on every membership change
        for member in members:
            self.add(member)

    # Membership -------------------------------------------------------------------------------------

    @staticmethod
    def member_id(member: Any) -> str:
        return member._actor_id.hex()

    def add(self, member: Any, member_id: str | None = None) -> None:
        with self._lock:
            key = member_id or self.member_id(member)
            if key in self._members:
                raise ValueError(f"worker group {self.name!r}: {key} is already a member")
            self._members[key] = member
            self.version += 1

    def remove(self, member_or_id: Any) -> Any:
        key = member_or_id if isinstance(member_or_id, str) else self.member_id(member_or_id)
        with self._lock:
            if key not in self._members:
                raise KeyError(f"worker group {self.name!r}: {key} is not a member")
            self.version += 1
            return self._members.pop(key)

    @property
    def members(self) -> list[Any]:
        with self._lock:
            return list(self._members.values())

    @property
    def ids(self) -> list[str]:
        with self._lock:
            return list(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, member_or_id: Any) -> bool:
        key = member_or_id if isinstance(member_or_id, str) else self.member_id(member_or_id)
        return key in self._members

    # Calls ------------------------------------------------------------------------------------------

    def __getattr__(self, method: str) -> Callable[..., list[Any]]:
        if method.startswith("_"):
            raise AttributeError(method)

        def fan_out(*args: Any, **kwargs: Any) -> list[Any]:
            """Call ``method`` on every current member; returns their ObjectRefs in member order."""
            return [getattr(member, method).remote(*args, **kwargs) for member in self.members]

        return fan_out

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> list[Any]:
        """Fan out and wait for every result."""
        return ray.get(getattr(self, method)(*args, **kwargs), timeout=timeout)

    async def acall(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        return list(await asyncio.gather(*getattr(self, method)(*args, **kwargs)))

    def dispatch_split(self, method: str, items: Sequence[Any], *, timeout: float | None = None) -> list[Any]:
        """Split ``items`` into contiguous chunks, one per member, call ``method(chunk)`` on each, and
        return the per-item results in the original order (each member returns a list per chunk)."""
        members = self.members
        if not members:
            raise RuntimeError(f"worker group {self.name!r} has no members to dispatch to")
        chunks = split_evenly(list(items), len(members))
        refs = [getattr(member, method).remote(chunk) for member, chunk in zip(members, chunks) if chunk]
        results: list[Any] = []
        for part in ray.get(refs, timeout=timeout):
            results.extend(part)
        return results


def split_evenly(items: list[Any], parts: int) -> list[list[Any]]:
    """Contiguous chunks whose sizes differ by at most one."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return chunks
