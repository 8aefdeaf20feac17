"""How a group call reaches its members and how their results come back, declared on the worker's method.

    class Rank:
        @register(DispatchMode.SPLIT)
        def train(self, batches): ...          # group.train(batches): each member gets its part

A ``WorkerGroup`` reads the mode of the method it is asked to call and applies it; the driver writes
``trainers.train(batches)``, never a loop of remote calls. The modes (after verl's ``register``):

- ``ONE_TO_ALL``: the same arguments to every member; their results, in member order.
- ``SPLIT``: the first argument, a list, cut into contiguous parts of sizes differing by at most one, one per
  member (a member may get an empty part: it is still called, so members that must act together all do);
  the members' result lists joined in order.
- ``PER_MEMBER``: every positional argument is a list with one entry per member; their results.
- ``RANK_ZERO``: only the first member is called; its result.
- ``STREAM``: the first argument is a list of items; each member takes the next ``stream_width`` items (an
  attribute of the member, default 1) as soon as it is free. Members that join the group while the call runs
  start taking items; members that leave finish the items they hold and take no more. The result lists of
  every take, joined in the order they finished.

A ``Collect`` overrides how results come back: ``ALL`` (a list), ``FIRST`` (the first member's: members
that compute the same thing together), ``CONCAT`` (lists joined).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

ATTRIBUTE = "__gyre_dispatch__"


class DispatchMode(str, Enum):
    """How a group call reaches a worker group's members (the scheduler's ``Dispatch`` action, which starts
    executions, is another thing)."""

    ONE_TO_ALL = "one_to_all"
    SPLIT = "split"
    PER_MEMBER = "per_member"
    RANK_ZERO = "rank_zero"
    STREAM = "stream"


class Collect(str, Enum):
    ALL = "all"
    FIRST = "first"
    CONCAT = "concat"


DEFAULT_COLLECT = {
    DispatchMode.ONE_TO_ALL: Collect.ALL,
    DispatchMode.SPLIT: Collect.CONCAT,
    DispatchMode.PER_MEMBER: Collect.ALL,
    DispatchMode.RANK_ZERO: Collect.FIRST,
    DispatchMode.STREAM: Collect.CONCAT,
}


def register(dispatch: DispatchMode, collect: Collect | None = None) -> Callable[[Callable], Callable]:
    """Declare how a group call of the decorated method is dispatched and collected."""

    if DispatchMode(dispatch) == DispatchMode.STREAM and collect not in (None, Collect.CONCAT):
        raise ValueError("a STREAM call joins the result lists of its takes (Collect.CONCAT); it has no other collect")

    def mark(method: Callable) -> Callable:
        setattr(method, ATTRIBUTE, (DispatchMode(dispatch), Collect(collect or DEFAULT_COLLECT[DispatchMode(dispatch)])))
        return method

    return mark


def mode_of(worker_cls: type, method: str) -> tuple[DispatchMode, Collect]:
    """The declared mode of ``worker_cls.method``; a clear error for a method a group cannot call."""
    name = getattr(worker_cls, "__name__", repr(worker_cls))  # a Ray ActorClass has no __name__
    function = getattr(worker_cls, method, None)
    if function is None:
        raise AttributeError(f"{name} has no method {method!r}")
    mode = getattr(function, ATTRIBUTE, None)
    if mode is None:
        raise AttributeError(f"{name}.{method} declares no dispatch mode (decorate it with @register)")
    return mode


def split_evenly(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """Contiguous chunks whose sizes differ by at most one (the first ones are the larger)."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        chunks.append(list(items[start:end]))
        start = end
    return chunks


def arguments(dispatch: DispatchMode, members: int, args: tuple, kwargs: dict) -> list[tuple[tuple, dict]]:
    """Each member's (args, kwargs) under ``dispatch`` (all but ``STREAM``, which hands out items itself)."""
    if dispatch in (DispatchMode.ONE_TO_ALL, DispatchMode.RANK_ZERO):
        return [(args, kwargs)] * (1 if dispatch == DispatchMode.RANK_ZERO else members)
    if dispatch == DispatchMode.SPLIT:
        if not args:
            raise TypeError("a SPLIT call needs its list as the first positional argument")
        return [((part, *args[1:]), kwargs) for part in split_evenly(args[0], members)]
    if dispatch == DispatchMode.PER_MEMBER:
        for arg in args:
            if len(arg) != members:
                raise ValueError(f"a PER_MEMBER call needs one entry per member ({members}), got {len(arg)}")
        return [(tuple(arg[i] for arg in args), kwargs) for i in range(members)]
    raise ValueError(f"{dispatch} hands out its arguments itself")


def collect(how: Collect, results: list[Any]) -> Any:
    if how == Collect.FIRST:
        return results[0] if results else None
    if how == Collect.CONCAT:
        return [item for part in results for item in part]
    return list(results)
