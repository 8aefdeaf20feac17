"""One streaming training step: a pool of FLOPs drained by whichever cells are computing.

A step starts with the cells already in TRAIN. A satellite that finishes switching to TRAIN mid-step first
pulls the weights (``weight_sync_s``) and then takes micro-batches; a cell that leaves stops taking them at
once. The step's compute is therefore ``FLOPs / (contributing cells x cell FLOP/s)`` integrated over the
membership changes (micro-batches are treated as fine-grained). When the compute is done the step spends
``step_overhead_s + weight_sync_s`` (optimizer step, new weights out to rollout cells) and only then does
the policy version advance. A step that started on part of its batch (``scheduler.stream_from < 1``) gets
the FLOPs of each execution that streams in (``add``); its trainers stall (idle) when they have computed all
they hold and more is still to come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

COMPUTE, SYNC = "compute", "sync"


@dataclass
class TrainingStep:
    index: int
    flops: float
    started: float
    executions: int
    tree_tokens: float
    contributors: set[int]
    pulling: dict[int, float] = field(default_factory=dict)  # cell -> time its weight pull ends
    phase: str = COMPUTE
    remaining: float = 0.0
    last: float = 0.0
    sync_end: float = math.inf
    epoch: int = 0  # bumps whenever the finish time may have moved (stale heap entries are skipped)
    compute_end: float = math.nan
    peak_cells: int = 0
    waiting: int = 0  # executions still to stream in (their FLOPs are added as they become ready)

    def __post_init__(self) -> None:
        self.remaining = self.flops
        self.last = self.started
        self.peak_cells = len(self.contributors)

    def advance(self, now: float, cell_flops: float) -> None:
        if self.phase == COMPUTE:
            self.remaining = max(0.0, self.remaining - (now - self.last) * len(self.contributors) * cell_flops)
        self.last = now

    def add(self, flops: float, executions: int, tree_tokens: float) -> None:
        """Executions that streamed in (call ``advance`` first)."""
        self.flops += flops
        self.remaining += flops
        self.waiting -= executions
        self.executions += executions
        self.tree_tokens += tree_tokens
        self.epoch += 1

    @property
    def stalled(self) -> bool:
        """Everything that streamed in is computed and more is still to come: the trainers wait."""
        return self.phase == COMPUTE and self.remaining <= 0 and self.waiting > 0

    def compute_eta(self, cell_flops: float) -> float:
        """When the FLOPs in hand are computed at the current membership (``inf`` while nobody computes,
        or while stalled)."""
        if self.phase != COMPUTE or self.stalled:
            return math.inf
        if self.remaining <= 0:
            return self.last
        if not self.contributors:
            return math.inf
        return self.last + self.remaining / (len(self.contributors) * cell_flops)

    def join(self, cell: int) -> None:
        self.pulling.pop(cell, None)
        self.contributors.add(cell)
        self.peak_cells = max(self.peak_cells, len(self.contributors))
        self.epoch += 1

    def leave(self, cell: int) -> None:
        self.pulling.pop(cell, None)
        if cell in self.contributors:
            self.contributors.discard(cell)
            self.epoch += 1
