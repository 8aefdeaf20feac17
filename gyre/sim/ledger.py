"""Where every cell-second went, and the cells' role timeline for the plot.

Between two events each cell is in exactly one state, so integrating state counts over time accounts for
``cells x wall`` cell-seconds exactly (the conservation the tests check). Rollout cells are split by the
throughput they use: a cell holding ``n`` of ``capacity`` sessions is ``utilisation[n]`` busy (executions/s
relative to a full cell) and the rest idle; at low concurrency a memory-bound engine is mostly idle.

The same cell-seconds are also split by phase: ``step`` while a training step runs (compute and its tail),
``wait`` while none does (the next batch is still being generated). With the look-ahead bound a cycle is a
wait for the batch's executions to finish followed by a step, and the split says which of the two a policy
loses its cell-seconds in (``benchmarks/sim_breakdown.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CATEGORIES = (
    "rollout_busy",  # serving cells' used throughput
    "rollout_idle",  # serving cells' unused throughput
    "train_compute",  # training cells taking micro-batches
    "train_overhead",  # training cells pulling weights, or in the step's optimizer/weight-sync tail
    "train_idle",  # training cells with nothing to do (no step running)
    "switching",  # cells between roles
    "other",  # cells in IDLE/DEAD
)
TRAINING = ("train_compute", "train_overhead", "train_idle")  # the categories of cells in the training role
PHASES = ("wait", "step")  # no training step running / one running (compute or its optimizer and sync tail)


@dataclass
class Counts:
    """Cells in each state right now; ``rollout_busy`` is in full-cell units."""

    serving: int = 0
    rollout_busy: float = 0.0
    switching: int = 0
    train: int = 0
    train_compute: int = 0
    train_overhead: int = 0
    other: int = 0


@dataclass
class Ledger:
    cells: int
    cell_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0.0))
    elapsed: float = 0.0
    roles: list[tuple[float, int, str]] = field(default_factory=list)  # (time, cell, role) on every change
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)  # (time, live, ready, train cells)
    # The part of rollout_idle while the policy could dispatch nothing (the look-ahead full, or the run's
    # executions all out): throughput no schedule under the same max_staleness could have used for rollout.
    rollout_idle_capped: float = 0.0
    # The same cell-seconds by phase (``PHASES``), and the wall seconds spent in each.
    by_phase: dict[str, dict[str, float]] = field(
        default_factory=lambda: {phase: dict.fromkeys(CATEGORIES, 0.0) for phase in PHASES})
    phase_elapsed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))

    def integrate(self, dt: float, counts: Counts, capped: bool = False, stepping: bool = False) -> None:
        if dt <= 0:
            return
        phase = "step" if stepping else "wait"
        for c in (self.cell_s, self.by_phase[phase]):
            c["rollout_busy"] += counts.rollout_busy * dt
            c["rollout_idle"] += (counts.serving - counts.rollout_busy) * dt
            c["train_compute"] += counts.train_compute * dt
            c["train_overhead"] += counts.train_overhead * dt
            c["train_idle"] += (counts.train - counts.train_compute - counts.train_overhead) * dt
            c["switching"] += counts.switching * dt
            c["other"] += counts.other * dt
        if capped:
            self.rollout_idle_capped += (counts.serving - counts.rollout_busy) * dt
        self.phase_elapsed[phase] += dt
        self.elapsed += dt

    def role(self, now: float, cell: int, role: str) -> None:
        self.roles.append((now, cell, role))

    def snapshot(self) -> dict[str, float]:
        return dict(self.cell_s)

    def phase_snapshot(self) -> dict[str, Any]:
        """Cell-seconds per phase and category, and seconds per phase, so far (a copy)."""
        return {"cell_s": {phase: dict(c) for phase, c in self.by_phase.items()}, "elapsed": dict(self.phase_elapsed)}
