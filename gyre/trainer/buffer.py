"""Which executions are running, which groups are complete and ready to train, and what each step takes.

GRPO-style advantages compare the samples of one task, so a group (the ``group_size`` samples of one
task) becomes ready only when all its members have finished, and steps consume whole groups.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from gyre.protocol import Execution


@dataclass
class Group:
    id: str
    task: Any
    size: int
    dispatch_version: int
    finished: list[Execution] = field(default_factory=list)

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
    def __init__(self, group_size: int):
        if group_size < 1:
            raise ValueError(f"trainer.group_size must be >= 1, got {group_size}")
        self.group_size = group_size
        self.open: dict[str, Group] = {}
        self.ready: OrderedDict[str, Group] = OrderedDict()
        self._ids = itertools.count()
        self.dropped_stale = 0
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

    @property
    def running(self) -> int:
        """Outstanding work in executions: members of groups not complete yet."""
        return sum(group.size for group in self.open.values())

    @property
    def ready_count(self) -> int:
        return sum(len(group.finished) for group in self.ready.values())

    def ready_versions(self) -> tuple[int, ...]:
        return tuple(group.version for group in self.ready.values() for _ in group.finished)

    def take(self, count: int, min_version: int | None) -> list[Group]:
        """Oldest complete groups with at least ``count`` executions, after dropping those older than
        ``min_version`` (None: keep stale groups)."""
        if min_version is not None:
            for group_id in [g.id for g in self.ready.values() if g.version < min_version]:
                self.dropped_stale += len(self.ready.pop(group_id).finished)
        taken, total = [], 0
        while self.ready and total < count:
            _, group = self.ready.popitem(last=False)
            taken.append(group)
            total += len(group.finished)
        return taken
