"""What a scheduling policy sees and what it may ask for. Plain values: no clock, no I/O, no Ray.

The driver (``gyre.trainer``) and the simulator (``gyre.sim``) both build a ``SchedulerState`` from their
world, call ``policy.decide(state)``, and apply the returned actions. All policy logic lives in the policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

VersionCounts = tuple[tuple[int, int], ...]  # (policy version, executions) pairs, ascending by version


def version_counts(versions: Iterable[int]) -> VersionCounts:
    """Per-execution versions as ``VersionCounts``: ``[3, 0, 3]`` -> ``((0, 1), (3, 2))``."""
    return tuple(sorted(Counter(versions).items()))


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
    capacity: int = 1  # sessions its engines hold at once (slots); with parking it serves more (hosted_capacity)
    switching_to: Role | None = None
    fast_capacity: int | None = None  # executions it serves at close to its single-session speed (None: capacity)
    active: int | None = None  # sessions holding one of its engine slots now (not parked); None: not observed

    @property
    def free(self) -> bool:
        """Holds no session's KV: empty, or every session it served is parked (their next calls may go to any
        rollout cell), so it can switch roles without moving anything."""
        return self.active == 0


@dataclass(frozen=True)
class SchedulerState:
    """One observation of the run.

    ``running`` are dispatched executions not yet finished (members of groups not complete yet), counted by
    the policy version each was dispatched under in ``running_versions`` (a lower bound of its calls'
    versions). ``ready`` are finished, scored executions not yet consumed by a training step, counted by
    the policy version each was generated under (oldest version of its calls) in ``ready_versions``.
    Versions are counts, not one entry per execution, so that observing a cluster of tens of thousands of
    executions stays cheap; executions left out of a count are taken to be at ``policy_version``.

    Parking. ``CellView.capacity`` counts engine slots (sessions whose KV a cell holds at once). Where
    sessions waiting on tools are parked (``gyre.scheduler.parking``), a live session holds a slot only
    ``slot_share`` of its time, so a rollout cell serves ``capacity / slot_share`` executions
    (``hosted_capacity``); without parking ``slot_share`` is 1 and the two are the same.
    """

    cells: tuple[CellView, ...]
    policy_version: int
    running: int
    ready: int
    ready_versions: VersionCounts = ()
    running_versions: VersionCounts = ()
    training: bool = False  # a training step is in progress
    steps_done: int = 0
    total_steps: int = 1
    executions_left: int | None = None  # tasks still available to dispatch (None: unbounded)
    # Measured by the observer (the policy has no clock); None until known:
    train_left_s: float | None = None  # training compute the running step still needs, or the next step when a
    # batch is ready and none runs, in seconds of one training cell
    join_s: float | None = None  # seconds from a rollout cell's switch to its first micro-batch (switch + weight pull)
    return_s: float | None = None  # seconds a training cell takes to switch back to rollout
    ready_rate: float | None = None  # executions becoming trainable per second, lately (``gyre.scheduler.rate``)
    step_waiting: int = 0  # executions the running step still waits for (a step streams in its batch's tail; 0
    # when no step runs)
    slot_share: float = 1.0  # share of a live session's time it holds an engine slot: (call + restore seconds) /
    # (call + restore + tool-gap seconds) over recent calls with parking, 1 without (a session keeps its slot)
    parked: int = 0  # live sessions parked now (in a tool, KV off every engine; their next call goes to any cell)

    def __post_init__(self) -> None:
        if not 0.0 < self.slot_share <= 1.0:
            raise ValueError(f"SchedulerState.slot_share must be in (0, 1], got {self.slot_share}")

    def hosted_capacity(self, cell: CellView) -> int:
        """Executions ``cell`` serves while rolling out: its slots over the share of time a session holds one
        (rounded down; the tolerance keeps ``slots / (slots / n)`` at ``n``)."""
        return int(cell.capacity / self.slot_share + 1e-9)

    def hosted_fast(self, cell: CellView) -> int:
        """Executions ``cell`` serves at close to its single-session speed (``fast_capacity`` counts sessions
        served, parked or not), at most its hosted capacity."""
        hosted = self.hosted_capacity(cell)
        return hosted if cell.fast_capacity is None else min(hosted, cell.fast_capacity)

    def ready_below(self, version: int) -> int:
        """Ready executions generated under a policy version older than ``version``."""
        return sum(count for v, count in self.ready_versions if v < version)

    def running_below(self, version: int) -> int:
        """Running executions dispatched under a policy version older than ``version``."""
        return sum(count for v, count in self.running_versions if v < version)

    def cells_in(self, role: Role) -> list[CellView]:
        return [cell for cell in self.cells if cell.role == role]

    def capacity_of(self, role: Role) -> int:
        """Executions the cells in ``role`` serve (hosted capacity: parked sessions hold no slot)."""
        return sum(self.hosted_capacity(cell) for cell in self.cells_in(role))

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
    """Drop the ``drop_stale`` oldest ready executions, then consume the next ``count`` into one training
    step. Oldest means lowest policy version, then earliest finished; both appliers order them so.

    With ``stream_from < 1`` a step starts before ``count`` are ready: it takes what is ready now and the
    rest as each group completes (``SchedulerState.step_waiting`` counts what it still waits for), and its
    trainers compute what they hold meanwhile (the driver and the simulator alike)."""

    count: int
    drop_stale: int = 0  # ready executions too stale to train on (stale_policy=drop)


@dataclass(frozen=True)
class AbortStale:
    """Stop every running execution dispatched under a policy version below ``before_version``: no step can
    train it any more (stale_policy=drop), so its calls are released and its slot freed at once."""

    before_version: int


Action = Dispatch | SwitchCell | StartTrainStep | AbortStale


@dataclass
class SchedulerConfig:
    name: str = "elastic"
    batch_size: int = 8  # executions per training step
    max_staleness: int = 1  # batches of look-ahead dispatched beyond the one being generated; with drop, also
    # the most policy versions a trained execution may lag behind the trainer
    stale_policy: str = "keep"  # keep: train every execution, IS-corrected in the loss | drop: discard staler ones
    rollout_cells: int = 2  # async only: fixed number of rollout cells
    stream_from: float = 1.0  # async and elastic: a step starts once this share of its batch is ready and the rest
    # streams in as it completes (colocate waits for the whole batch by definition)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"scheduler.batch_size must be >= 1, got {self.batch_size}")
        if self.max_staleness < 0:
            raise ValueError(f"scheduler.max_staleness must be >= 0, got {self.max_staleness}")
        if not 0.0 < self.stream_from <= 1.0:
            raise ValueError(f"scheduler.stream_from must be in (0, 1], got {self.stream_from}")
        if self.stale_policy not in ("drop", "keep"):
            raise ValueError(f"scheduler.stale_policy must be 'drop' or 'keep', got {self.stale_policy!r}")
