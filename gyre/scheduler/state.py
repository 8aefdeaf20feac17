"""What a scheduling policy sees and what it may ask for. Plain values: no clock, no I/O, no Ray.

The driver (``gyre.trainer``) and the simulator (``gyre.sim``) both build a ``SchedulerState`` from their
world, call ``policy.decide(state)``, and apply the returned actions. All policy logic lives in the policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Role(str, Enum):
    ROLLOUT = "rollout"
    TRAIN = "train"
    SWITCHING = "switching"
    IDLE = "idle"  # holds nothing active (e.g. between colocate phases)
    DEAD = "dead"


@dataclass(frozen=True)
class CellView:
    id: str
    role: Role
    is_core: bool = False
    capacity: int = 1  # concurrent executions this cell can serve while it rolls out
    switching_to: Role | None = None


@dataclass(frozen=True)
class SchedulerState:
    """One observation of the run.

    ``running`` are dispatched executions not yet finished (the outstanding work w = dispatched - finished).
    ``ready`` are finished, scored executions not yet consumed by a training step, with the policy version
    each was generated under in ``ready_versions`` (oldest version of its calls).
    """

    cells: tuple[CellView, ...]
    policy_version: int
    running: int
    ready: int
    ready_versions: tuple[int, ...] = ()
    training: bool = False  # a training step is in progress
    steps_done: int = 0
    total_steps: int = 1
    executions_left: int | None = None  # tasks still available to dispatch (None: unbounded)

    def cells_in(self, role: Role) -> list[CellView]:
        return [cell for cell in self.cells if cell.role == role]

    def capacity_of(self, role: Role) -> int:
        return sum(cell.capacity for cell in self.cells_in(role))

    @property
    def core(self) -> CellView:
        return next(cell for cell in self.cells if cell.is_core)

    @property
    def switching(self) -> bool:
        return any(cell.role == Role.SWITCHING for cell in self.cells)

    @property
    def done(self) -> bool:
        return self.steps_done >= self.total_steps


@dataclass(frozen=True)
class Dispatch:
    """Start ``count`` new executions (the driver picks the tasks and the rollout cells place them)."""

    count: int


@dataclass(frozen=True)
class SwitchCell:
    cell_id: str
    to: Role


@dataclass(frozen=True)
class StartTrainStep:
    """Consume ``count`` ready executions (oldest first) into one training step."""

    count: int
    drop_stale: int = 0  # ready executions too stale to train on, dropped first (stale_policy=drop)


Action = Dispatch | SwitchCell | StartTrainStep


@dataclass
class SchedulerConfig:
    name: str = "elastic"
    batch_size: int = 8  # executions per training step
    max_staleness: int = 1  # policy versions an execution may lag behind the trainer
    stale_policy: str = "drop"  # drop | keep (keep: trained with importance-sampling correction)
    rollout_cells: int = 2  # async only: fixed number of rollout cells
    satellites_return: bool = True  # elastic: satellites go back to rollout when the step ends
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"scheduler.batch_size must be >= 1, got {self.batch_size}")
        if self.max_staleness < 0:
            raise ValueError(f"trainer.max_staleness must be >= 0, got {self.max_staleness}")
        if self.stale_policy not in ("drop", "keep"):
            raise ValueError(f"trainer.stale_policy must be 'drop' or 'keep', got {self.stale_policy!r}")
