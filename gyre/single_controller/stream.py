"""A ``STREAM`` group call in flight: items in a queue, taken by whichever member is free.

The call reads its group's members afresh at every turn, so a member that joins the group mid-call starts
taking items and one that leaves finishes what it holds and takes no more (``release`` waits for that).
It keeps what a scheduler wants to know about it: items left, who is busy, each take's seconds, the items
each member did. An open-ended call (``open_ended=True``) also takes items ``put`` while it runs, and ends
only once it is ``close``d and everything is done (a training step streaming in its batch's tail).

A member whose process died (``lost(member_id, error)`` says so) does not fail the call: what it did lived
only in it until it left (a training replica's gradients), so every item it took since it joined goes back
to the front of the queue, its results are dropped, and the members left do them again (``redone``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any


class StreamCall:
    def __init__(self, items: list[Any], members: Callable[[], Iterable[tuple[str, Any]]],
                 take: Callable[[Any, list[Any]], Any], *, open_ended: bool = False,
                 lost: Callable[[str, BaseException], bool] | None = None):
        """``members()``: the group's (id, member) pairs now; ``take(member, items)``: an awaitable of the
        member's result list for ``items``; ``open_ended``: more items may be ``put`` until ``close``;
        ``lost(member_id, error)``: True when a take's error means the member is gone for good (its items
        are redone by the others), False when the error fails the call (the default for every error)."""
        self.queue: deque[Any] = deque(items)
        self.total = len(items)
        self.inflight: dict[str, asyncio.Future] = {}
        self._held: dict[str, list[Any]] = {}  # items each busy member holds
        self._kept: dict[str, tuple[list[Any], list[Any]]] = {}  # items done and results of a member still in it
        self.results: list[Any] = []
        self.done_by: dict[str, int] = {}  # items each member did (a lost member's are not counted)
        self.seconds: list[float] = []  # wall seconds of each take, per item it held
        self.lost_members: list[str] = []
        self.redone = 0  # items handed out again because the member that took them was lost
        self._members, self._take, self._lost = members, take, lost
        self.closed = not open_ended
        self._changed = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    def changed(self) -> None:
        """The group's membership changed: look again."""
        self._changed.set()

    def put(self, items: Iterable[Any]) -> None:
        """More items for an open-ended call (free members take them at once)."""
        if self.closed:
            raise RuntimeError("put on a stream call that is closed (or was not opened with open_ended=True)")
        items = list(items)
        self.queue.extend(items)
        self.total += len(items)
        self.changed()

    def close(self) -> None:
        """No more items: the call ends once what it has is done."""
        self.closed = True
        self.changed()

    @property
    def left(self) -> int:
        """Items not done yet (queued or held)."""
        return len(self.queue) + sum(len(items) for items in self._held.values())

    @property
    def done(self) -> bool:
        return self._task.done()

    async def release(self, member_id: str) -> None:
        """Wait until ``member_id`` holds no item (call after it left the group). What it did is the
        caller's from then on (e.g. it pushes the member's gradients out): a later loss no longer redoes it."""
        future = self.inflight.get(member_id)
        if future is not None:
            await asyncio.wait([future])
        self._kept.pop(member_id, None)
        self.changed()

    def __await__(self):
        return self._task.__await__()

    async def _run(self) -> list[Any]:
        while self.queue or self.inflight or not self.closed:
            for member_id, member in self._members():
                if member_id not in self.inflight and self.queue and member_id not in self.lost_members:
                    width = max(1, int(getattr(member, "stream_width", 1)))
                    items = [self.queue.popleft() for _ in range(min(width, len(self.queue)))]
                    self._held[member_id] = items
                    self.inflight[member_id] = asyncio.ensure_future(self._do(member_id, member, items))
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait([waiter, *self.inflight.values()], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            for member_id, future in list(self.inflight.items()):
                if future.done():
                    del self.inflight[member_id]
                    held = self._held.pop(member_id, [])
                    error = future.exception()
                    if error is None:
                        continue
                    if self._lost is not None and self._lost(member_id, error):
                        self._redo(member_id, held)
                        continue
                    await self._fail()
                    future.result()  # a member's failure fails the call
        return self.results

    def _redo(self, member_id: str, held: list[Any]) -> None:
        """A lost member's items, held or done since it joined, go back to the front of the queue."""
        done, kept = self._kept.pop(member_id, ([], []))
        dropped = {id(result) for result in kept}
        self.results = [result for result in self.results if id(result) not in dropped]
        self.done_by[member_id] = self.done_by.get(member_id, 0) - len(done)
        items = done + held
        self.queue.extendleft(reversed(items))
        self.redone += len(items)
        self.lost_members.append(member_id)

    async def _fail(self) -> None:
        """A take failed: hand out nothing more and let the other takes end (their errors are retrieved),
        so the call ends with no work of it still running."""
        self.queue.clear()
        self.closed = True
        await asyncio.gather(*self.inflight.values(), return_exceptions=True)
        self.inflight.clear()
        self._held.clear()

    async def _do(self, member_id: str, member: Any, items: list[Any]) -> None:
        started = time.perf_counter()
        results = list(await self._take(member, items))
        self.seconds += [(time.perf_counter() - started) / len(items)] * len(items)
        self.results.extend(results)
        self.done_by[member_id] = self.done_by.get(member_id, 0) + len(items)
        if self._lost is not None:  # should the member be lost before it leaves, these are redone
            done, kept = self._kept.setdefault(member_id, ([], []))
            done += items
            kept += results
