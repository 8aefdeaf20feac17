"""Workers called as one: ``group.method(...)`` reaches the members as ``method`` declares (``dispatch``).

Members are Ray actor handles (called with ``.remote``) or local objects whose methods return awaitables
(a group of groups: a cell is a group over its ranks, and the trainer is a group over cells). Membership
changes at any time. A group's members are either its own (``add`` / ``remove``) or those of one group of
a ``Membership`` record, read afresh at every call (then the record is changed, not the group).

A call is issued when the method is called and awaited for its collected result (``await group.m(x)``;
``.get()`` blocks, outside an event loop, for Ray members). A call already issued keeps the members it was
issued to, so removing a member mid-call neither cancels nor loses its result; a ``STREAM`` call instead
follows the membership as it changes (``release`` waits for a departed member's items). Knows nothing
about RL.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray

from gyre.single_controller.dispatch import Collect, DispatchMode, arguments, collect, mode_of
from gyre.single_controller.membership import Membership
from gyre.single_controller.stream import StreamCall


class GroupCall:
    """A non-streaming group call in flight: await it for the collected result."""

    def __init__(self, pending: list[Any], how: Collect):
        self.pending, self.how = pending, how

    def __await__(self):
        return self._wait().__await__()

    async def _wait(self) -> Any:
        return collect(self.how, list(await asyncio.gather(*self.pending)))

    def get(self, timeout: float | None = None) -> Any:
        """Block for the result (Ray members only; not from inside an event loop)."""
        return collect(self.how, ray.get(self.pending, timeout=timeout))


class WorkerGroup:
    def __init__(self, name: str, worker_cls: type, members: Sequence[Any] | Mapping[str, Any] = (), *,
                 membership: Membership | None = None, handles: Mapping[str, Any] | None = None,
                 lost: Callable[[str, BaseException], bool] | None = None):
        """``members``: a list (keyed by actor id) or a mapping id -> member; or ``membership`` + ``handles``:
        the members of group ``name`` in that record, by id. ``worker_cls`` declares the dispatch mode of
        each method a group call may use (``@register``). ``lost(member_id, error)``: whether a member's error
        in a ``STREAM`` call means it is gone (its items are redone by the others; `StreamCall`)."""
        self.name, self.worker_cls = name, worker_cls
        self.membership, self.handles, self.lost = membership, handles, lost
        self._members: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._streams: list[StreamCall] = []
        self.version = 0  # bumped on every membership change
        if membership is not None:
            if handles is None:
                raise ValueError(f"worker group {name!r}: a membership-backed group needs the members' handles")
            membership.subscribe(lambda _version: self._membership_changed())
        items = members.items() if isinstance(members, Mapping) else ((self.member_id(m), m) for m in members)
        for member_id, member in items:
            self.add(member, member_id)

    @staticmethod
    def member_id(member: Any) -> str:
        actor_id = getattr(member, "_actor_id", None)
        return actor_id.hex() if actor_id is not None else str(id(member))

    # Membership -------------------------------------------------------------------------------------

    def _key(self, member_or_id: Any) -> str:
        return member_or_id if isinstance(member_or_id, str) else self.member_id(member_or_id)

    def items(self) -> list[tuple[str, Any]]:
        if self.membership is not None:
            return [(m, self.handles[m]) for m in self.membership.members(self.name)]  # type: ignore[index]
        with self._lock:
            return list(self._members.items())

    @property
    def ids(self) -> list[str]:
        return [member_id for member_id, _ in self.items()]

    @property
    def members(self) -> list[Any]:
        return [member for _, member in self.items()]

    def __len__(self) -> int:
        return len(self.items())

    def __contains__(self, member_or_id: Any) -> bool:
        return self._key(member_or_id) in self.ids

    def add(self, member: Any, member_id: str | None = None) -> None:
        self._own_membership("add")
        key = member_id or self.member_id(member)
        with self._lock:
            if key in self._members:
                raise ValueError(f"worker group {self.name!r}: {key} is already a member")
            self._members[key] = member
            self.version += 1
        self._membership_changed()

    def remove(self, member_or_id: Any) -> Any:
        self._own_membership("remove")
        key = self._key(member_or_id)
        with self._lock:
            if key not in self._members:
                raise KeyError(f"worker group {self.name!r}: {key} is not a member")
            self.version += 1
            member = self._members.pop(key)
        self._membership_changed()
        return member

    def _own_membership(self, change: str) -> None:
        if self.membership is not None:
            raise RuntimeError(f"worker group {self.name!r} follows a membership record: {change} through the record")

    async def release(self, member_ids: Sequence[str]) -> None:
        """Wait until the given (departed) members hold no item of any streaming call of this group."""
        await asyncio.gather(*[call.release(m) for call in self.streams for m in member_ids])

    @property
    def streams(self) -> list[StreamCall]:
        """This group's streaming calls still running."""
        self._streams = [call for call in self._streams if not call.done]
        return list(self._streams)

    def _membership_changed(self) -> None:
        for call in self.streams:
            call.changed()

    # Calls ------------------------------------------------------------------------------------------

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        dispatch, how = mode_of(self.worker_cls, method)

        def call(*args: Any, **kwargs: Any) -> GroupCall | StreamCall:
            if dispatch == DispatchMode.STREAM:
                if not args:
                    raise TypeError(f"a STREAM call of {method} needs its list of items as the first argument")
                return self._stream(method, list(args[0]), args[1:], kwargs)
            members = self.members
            if not members:
                raise RuntimeError(f"worker group {self.name!r} has no members to call {method} on")
            each = arguments(dispatch, len(members), args, kwargs)
            return GroupCall([_invoke(member, method, a, k) for member, (a, k) in zip(members, each)], how)

        call.__name__ = method
        return call

    def stream(self, method: str, items: list[Any], *args: Any, **kwargs: Any) -> StreamCall:
        """An open-ended ``STREAM`` call of ``method``: ``items`` now, more ``put`` later, ended by ``close``."""
        if mode_of(self.worker_cls, method)[0] != DispatchMode.STREAM:
            raise TypeError(f"{method} is not registered as a STREAM call")
        return self._stream(method, list(items), args, kwargs, open_ended=True)

    def _stream(self, method: str, items: list[Any], args: tuple, kwargs: dict, open_ended: bool = False) -> StreamCall:
        stream = StreamCall(items, self.items,
                            lambda member, part: _awaitable(_invoke(member, method, (part, *args), kwargs)),
                            open_ended=open_ended, lost=self.lost)
        self._streams.append(stream)
        return stream


def _invoke(member: Any, method: str, args: tuple, kwargs: dict) -> Any:
    """Start ``member.method(*args, **kwargs)`` now; returns something awaitable (an ObjectRef, a task)."""
    if isinstance(member, ray.actor.ActorHandle):
        return getattr(member, method).remote(*args, **kwargs)
    result = getattr(member, method)(*args, **kwargs)
    if inspect.isawaitable(result):
        return asyncio.ensure_future(result)
    done = asyncio.get_running_loop().create_future()
    done.set_result(result)
    return done


async def _awaitable(pending: Any) -> Any:
    return await pending
