"""Streaming training: a step's packed micro-batches sit in a queue and every trainer member pulls the next
one as soon as it is free. Members may join (after pulling the core's weights) or leave mid-step.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from gyre.protocol import PackedBatch


class StreamingStep:
    def __init__(self, batches: list[PackedBatch]):
        self.queue: deque[PackedBatch] = deque(batches)
        self.total = len(batches)
        self.members: dict[str, Any] = {}
        self.inflight: dict[str, asyncio.Future] = {}
        self.stats: list[dict[str, float]] = []
        self.done_by: dict[str, int] = {}  # micro-batches each member trained
        self.seconds: list[float] = []  # wall time of each micro-batch on its member (what the scheduler is told)
        self._changed = asyncio.Event()

    def add_member(self, member_id: str, actor: Any) -> None:
        self.members[member_id] = actor
        self.done_by.setdefault(member_id, 0)
        self._changed.set()

    async def remove_member(self, member_id: str) -> None:
        """Stop giving ``member_id`` work and wait for the micro-batch it is on (its gradient must count)."""
        self.members.pop(member_id, None)
        future = self.inflight.get(member_id)
        if future is not None:
            await asyncio.wait([future])
        self._changed.set()

    @property
    def finished(self) -> bool:
        return not self.queue and not self.inflight

    async def run(self) -> list[dict[str, float]]:
        """Feed micro-batches until all are trained; returns their statistics."""
        while not self.finished:
            for member_id, actor in list(self.members.items()):
                if member_id not in self.inflight and self.queue:
                    batch = self.queue.popleft()
                    self.inflight[member_id] = asyncio.ensure_future(self._train(member_id, actor, batch))
            if not self.inflight:
                if self.queue and not self.members:
                    self._changed.clear()
                    await self._changed.wait()  # no trainer yet (the core is still switching)
                continue
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait([waiter, *self.inflight.values()], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            for member_id, future in list(self.inflight.items()):
                if future.done():
                    del self.inflight[member_id]
                    future.result()  # re-raise a member's failure
        return self.stats

    @property
    def left(self) -> int:
        """Micro-batches not trained yet (queued or in flight)."""
        return len(self.queue) + len(self.inflight)

    async def _train(self, member_id: str, actor: Any, batch: PackedBatch) -> None:
        started = time.perf_counter()
        stats = await actor.train_microbatch.remote(batch)
        self.seconds.append(time.perf_counter() - started)
        self.stats.append(stats)
        self.done_by[member_id] = self.done_by.get(member_id, 0) + 1
