"""Which executions are running, which groups are complete and ready to train, and what each step takes.

GRPO-style advantages compare the samples of one task, so a group (the ``group_size`` samples of one
task) becomes ready only when all its members have finished, and steps consume whole groups.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from gyre.protocol import Execution
from gyre.scheduler.rate import ReadyRate
from gyre.scheduler.state import VersionCounts, version_counts


@dataclass
class Group:
    id: str
    task: Any
    size: int
    dispatch_version: int
    finished: list[Execution] = field(default_factory=list)
    handles: list[Any] = field(default_factory=list)  # what to cancel to stop its running members (driver's)

    @property
    def complete(self) -> bool:
        return len(self.finished) >= self.size

    @property
    def version(self) -> int:
        """The oldest policy version that generated any of its calls (its staleness anchor)."""
        versions = [call.weight_version for e in self.finished for call in e.calls]
        return min(versions) if versions else self.dispatch_version


class TaskSampler:
    """Tasks in a seeded shuffled order, epoch after epoch; its position is saved in checkpoints."""

    def __init__(self, tasks: list[Any], seed: int, position: int = 0):
        if not tasks:
            raise ValueError("no training tasks: check the recipe's task folders (env.tasks)")
        self.tasks, self.seed, self.position = tasks, seed, position

    def next(self) -> Any:
        epoch, index = divmod(self.position, len(self.tasks))
        order = list(range(len(self.tasks)))
        random.Random(self.seed * 100_003 + epoch).shuffle(order)
        self.position += 1
        return self.tasks[order[index]]


class ExecutionBuffer:
    def __init__(self, group_size: int, ready_rate: ReadyRate | None = None):
        if group_size < 1:
            raise ValueError(f"trainer.group_size must be >= 1, got {group_size}")
        self.group_size = group_size
        self.ready_rate = ready_rate  # records each group as it becomes ready (what the scheduler observes)
        self.open: dict[str, Group] = {}
        self.ready: dict[str, Group] = {}
        self._ids = itertools.count()
        self._completed = itertools.count()  # completion order of ready groups
        self.order: dict[str, int] = {}
        self.dropped_stale = 0
        self.aborted = 0
        self.unscorable = 0

    def new_group(self, task: Any, version: int) -> Group:
        group = Group(f"{getattr(task, 'id', task)}#{next(self._ids)}", task, self.group_size, version)
        self.open[group.id] = group
        return group

    def finish(self, group_id: str, execution: Execution, scorable: bool = True) -> None:
        group = self.open[group_id]
        if scorable:
            group.finished.append(execution)
        else:
            group.size -= 1  # left out of training; the rest of its group still counts
            self.unscorable += 1
        if group.complete:
            del self.open[group_id]
            if group.finished:
                self.ready[group_id] = group
                self.order[group_id] = next(self._completed)
                if self.ready_rate is not None:
                    self.ready_rate.add(len(group.finished))

    @property
    def running(self) -> int:
        """Outstanding work in executions: members of groups not complete yet."""
        return sum(group.size for group in self.open.values())

    @property
    def ready_count(self) -> int:
        return sum(len(group.finished) for group in self.ready.values())

    def ready_versions(self) -> VersionCounts:
        return version_counts(group.version for group in self.ready.values() for _ in group.finished)

    def running_versions(self) -> VersionCounts:
        """Running executions by the version their group was dispatched under (the simulator's anchor too)."""
        counts: dict[int, int] = {}
        for group in self.open.values():
            counts[group.dispatch_version] = counts.get(group.dispatch_version, 0) + group.size
        return tuple(sorted(counts.items()))

    def abort(self, before_version: int) -> list[Group]:
        """Stop the groups dispatched under a version below ``before_version`` (no step can train them):
        they leave the buffer, their finished members are discarded; the caller cancels their handles."""
        doomed = [g for g in self.open.values() if g.dispatch_version < before_version]
        for group in doomed:
            del self.open[group.id]
            self.aborted += group.size
        return doomed

    def take(self, count: int, drop: int = 0) -> list[Group]:
        """Drop the ``drop`` oldest ready executions, then take the next complete groups until they hold at
        least ``count`` executions. Oldest: lowest policy version, then earliest completed (the order the
        simulator applies a ``StartTrainStep`` in). ``drop`` must end on a group boundary."""
        order = sorted(self.ready.values(), key=lambda g: (g.version, self.order[g.id]))
        dropped = 0
        while dropped < drop:
            if not order:
                raise ValueError(f"asked to drop {drop} stale executions but only {dropped} were ready")
            group = order.pop(0)
            dropped += len(group.finished)
            self._remove(group)
        if dropped != drop:
            raise ValueError(f"asked to drop {drop} stale executions; whole groups come to {dropped}")
        self.dropped_stale += dropped
        taken, total = [], 0
        for group in order:
            if total >= count:
                break
            taken.append(group)
            total += len(group.finished)
            self._remove(group)
        return taken

    def _remove(self, group: Group) -> None:
        del self.ready[group.id]
        del self.order[group.id]
