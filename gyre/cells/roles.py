"""A cell's role state machine and the time it spends in each role.

ROLLOUT <-> SWITCHING <-> TRAIN, and any role -> DEAD. A cell never decides to switch: the driver applies a
policy's ``SwitchCell`` action through ``begin`` / ``finish``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from gyre.scheduler.state import Role

_ALLOWED = {
    Role.IDLE: {Role.ROLLOUT, Role.TRAIN},
    Role.ROLLOUT: {Role.TRAIN},
    Role.TRAIN: {Role.ROLLOUT},
}


class RoleError(RuntimeError):
    pass


@dataclass
class RoleMachine:
    cell_id: str
    role: Role = Role.IDLE
    target: Role | None = None
    clock: callable = time.monotonic
    timeline: list[tuple[float, Role]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.timeline.append((self.clock(), self.role))

    def begin(self, to: Role) -> None:
        if self.role == Role.DEAD:
            raise RoleError(f"cell {self.cell_id} is dead")
        if self.role == Role.SWITCHING:
            raise RoleError(f"cell {self.cell_id} is already switching to {self.target.value}")
        if to not in _ALLOWED.get(self.role, set()):
            raise RoleError(f"cell {self.cell_id}: cannot switch from {self.role.value} to {to.value}")
        self.target = to
        self._enter(Role.SWITCHING)

    def finish(self) -> Role:
        if self.role != Role.SWITCHING or self.target is None:
            raise RoleError(f"cell {self.cell_id} is not switching")
        to, self.target = self.target, None
        self._enter(to)
        return to

    def fail(self) -> None:
        self.target = None
        self._enter(Role.DEAD)

    def _enter(self, role: Role) -> None:
        self.role = role
        self.timeline.append((self.clock(), role))

    def seconds_in_roles(self, until: float | None = None) -> dict[str, float]:
        until = self.clock() if until is None else until
        totals: dict[str, float] = defaultdict(float)
        for (start, role), (end, _) in zip(self.timeline, self.timeline[1:] + [(until, self.role)]):
            totals[role.value] += max(0.0, end - start)
        return dict(totals)
