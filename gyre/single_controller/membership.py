"""Which member is in which worker group: one record, and everything that needs to know derives from it.

A member is in at most one group at a time. A move has three moments, each visible here:

- ``plan``: the move is asked for. The member stays in its group (it keeps serving or training) and shows
  its target, so whoever decides sees it as moving from that moment on.
- ``leave``: the member is out of its group (it gets no new work there): the membership version bumps.
- ``enter``: the member is in its target group and takes work there: the version bumps again.

Listeners (``subscribe``) are called at every change; worker groups backed by the record (their members,
their streaming calls' workers) and every other view (a scheduler's observation, the role timeline) are
read from it, never kept aside. Each member's history of states (a group name, ``switching``, ``idle``
before any group, ``dead``) is kept for timelines. Knows nothing about what the groups do.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

IDLE, MOVING, DEAD = "idle", "switching", "dead"


class MembershipError(RuntimeError):
    pass


class Membership:
    def __init__(self, member_ids: Iterable[str], clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._group: dict[str, str | None] = dict.fromkeys(member_ids)
        self._target: dict[str, str] = {}
        self._dead: set[str] = set()
        self.version = 0
        self.timeline: dict[str, list[tuple[float, str]]] = {m: [(clock(), IDLE)] for m in self._group}
        self._listeners: list[Callable[[int], None]] = []

    # Reading ----------------------------------------------------------------------------------------

    @property
    def ids(self) -> list[str]:
        return list(self._group)

    def group_of(self, member_id: str) -> str | None:
        return self._group[self._known(member_id)]

    def target_of(self, member_id: str) -> str | None:
        """Where a planned or running move takes the member (None when it is not moving)."""
        return self._target.get(self._known(member_id))

    def is_dead(self, member_id: str) -> bool:
        return self._known(member_id) in self._dead

    def members(self, group: str) -> list[str]:
        """The members in ``group``, in the order they were registered."""
        return [m for m, g in self._group.items() if g == group]

    def state(self, member_id: str) -> str:
        """The member's state as its timeline records it."""
        return self.timeline[self._known(member_id)][-1][1]

    def seconds_in_states(self, member_id: str, until: float | None = None) -> dict[str, float]:
        until = self.clock() if until is None else until
        line = self.timeline[self._known(member_id)]
        totals: dict[str, float] = defaultdict(float)
        for (start, state), (end, _) in zip(line, line[1:] + [(until, line[-1][1])]):
            totals[state] += max(0.0, end - start)
        return dict(totals)

    # Changing ---------------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[int], None]) -> None:
        """``listener(version)`` runs after every change of group membership."""
        self._listeners.append(listener)

    def plan(self, moves: Mapping[str, str]) -> None:
        """Ask for moves (member -> target group); all or none are taken."""
        for member_id, to in moves.items():
            if self.is_dead(member_id):
                raise MembershipError(f"{member_id} is dead")
            if member_id in self._target:
                raise MembershipError(f"{member_id} is already moving to {self._target[member_id]}")
            if self._group[member_id] == to:
                raise MembershipError(f"{member_id} is already in {to}")
        self._target.update(moves)

    def leave(self, member_ids: Iterable[str]) -> None:
        """Planned members leave their groups (they take no new work there)."""
        ids = [self._known(m) for m in member_ids]
        for member_id in ids:
            if member_id not in self._target:
                raise MembershipError(f"{member_id} has no planned move to leave for")
            self._group[member_id] = None
        self._changed(dict.fromkeys(ids, MOVING))

    def enter(self, member_ids: Iterable[str]) -> None:
        """Members that left enter their target groups."""
        ids = [self._known(m) for m in member_ids]
        for member_id in ids:
            if member_id not in self._target or self._group[member_id] is not None:
                raise MembershipError(f"{member_id} has not left its group for a planned move")
        for member_id in ids:
            self._group[member_id] = self._target.pop(member_id)
        self._changed({m: self._group[m] for m in ids})

    def move(self, moves: Mapping[str, str]) -> None:
        """Plan, leave and enter at once."""
        self.plan(moves)
        self.leave(moves)
        self.enter(moves)

    def abandon(self, member_ids: Iterable[str]) -> None:
        """Planned moves that cannot complete (e.g. a member they needed died): the members are in no group
        and have no target (``idle``) until a new move is planned."""
        ids = [self._known(m) for m in member_ids if not self.is_dead(m)]
        for member_id in ids:
            self._group[member_id] = None
            self._target.pop(member_id, None)
        if ids:
            self._changed(dict.fromkeys(ids, IDLE))

    def fail(self, member_ids: Iterable[str]) -> None:
        """Members that can no longer work: out of every group, moves dropped."""
        ids = [self._known(m) for m in member_ids]
        for member_id in ids:
            self._group[member_id] = None
            self._target.pop(member_id, None)
            self._dead.add(member_id)
        self._changed(dict.fromkeys(ids, DEAD))

    def revive(self, member_id: str) -> None:
        """A dead member replaced (a new process under its id): ``idle``, in no group, until moved."""
        if not self.is_dead(member_id):
            raise MembershipError(f"{member_id} is not dead")
        self._dead.discard(member_id)
        self._changed({member_id: IDLE})

    def _changed(self, states: dict[str, str | None]) -> None:
        now = self.clock()
        for member_id, state in states.items():
            self.timeline[member_id].append((now, state))
        self.version += 1
        for listener in list(self._listeners):
            listener(self.version)

    def _known(self, member_id: str) -> str:
        if member_id not in self._group:
            raise KeyError(f"{member_id!r} is not a member (members: {', '.join(self._group)})")
        return member_id
