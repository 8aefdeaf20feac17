"""What one simulated run of one policy produced: the headline numbers plus the full accounting.

Policies are compared on equal work: ``work_rate`` is the work of the executions a policy trained (cell-seconds
of rollout and training at best efficiency, ``gyre.sim.world``) per second of wall time, so a policy that
trains only the executions that finish first does not look faster for it. ``length_bias`` says how far its
trained executions differ from what it dispatched (mean nominal work, trained / dispatched; 1 = unbiased; the
dispatched ones counted are those that could have finished before the run ended, ``length_bias_all`` counts
every one),
and ``ideal_time_s`` is its own trained work spread over every cell, a bound no schedule can beat.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gyre.sim.ledger import CATEGORIES, TRAINING


@dataclass
class SimResult:
    policy: str
    preset: str
    cells: int
    gpus_per_cell: int
    capacity_per_cell: int  # sessions a rollout cell serves before it time-shares (its slots, more with parking)
    steps: int
    batch_size: int
    max_staleness: int
    max_paths: int | None
    rollout_cells: int | None  # async's fixed split
    wall_time_s: float  # end of the last training step
    ideal_time_s: float  # the trained work over all cells: no schedule trains it faster
    sample_ideal_time_s: float  # the same for an unbiased sample (the stream's first steps x batch executions)
    trained_work_cell_s: float  # rollout + training work of the trained executions (as far as each ran)
    trained_rollout_work_cell_s: float  # its rollout part
    trained_policy_tokens: float  # policy-generated tokens the steps trained on (uncapped)
    length_bias: float  # mean nominal work of trained executions / of the dispatched ones that could have
    # finished before the run ended (dispatch time + their duration alone on a cell <= wall time)
    length_bias_all: float  # the same over every dispatched execution (a short run's end cuts long ones)
    cell_s: dict[str, float]  # cell-seconds per ledger category up to wall_time_s
    staleness_mean: float
    staleness_max: int
    switches: int
    dispatched: int
    finished: int
    trained: int
    dropped: int
    aborted: int  # executions stopped while running (or waiting for their group) because no step could take them
    timed_out: int
    live_at_end: int  # dispatched but unfinished when the last step ended
    ready_at_end: int  # finished but never trained
    wasted_rollout_cell_s: float  # rollout work of executions that were dropped or never trained
    trained_rollout_cell_s: float  # rollout work (as used) of the executions that were trained
    dropped_rollout_cell_s: float  # rollout work of executions dropped as too stale (part of the wasted work)
    rollout_idle_capped_cell_s: float  # the part of cell_s["rollout_idle"] while nothing could be dispatched
    train_flops: float
    migrations: float  # sessions whose KV moved cells (expected count: with parking, the share mid-call)
    migration_s: float
    step_end_s: list[float]
    train_compute_s: list[float]  # per step: start of training to end of compute
    parking: bool  # sessions waiting on tools gave back their slots (sim.parking.enabled)
    slots_per_cell: int  # sessions a rollout cell holds in its engines at once (capacity_per_cell without parking)
    slot_share: float  # share of its time a session holds a slot (slots / capacity; 1 without parking)
    trained_tool_s: float  # tool seconds of the trained executions (as far as each ran)
    trained_parked_tool_s: float  # the part of them spent parked (no slot held)
    trained_restore_s: float  # seconds the trained executions spent restoring parked KV
    moved_while_parked: float  # sessions that changed cells while parked (a cell left rollout): nothing moved
    sim_seconds: float  # host time the simulation took
    events: int
    decide_calls: int
    total_elapsed_s: float  # simulated time including a drain (>= wall_time_s)
    total_cell_s: dict[str, float]  # cell-seconds per category up to total_elapsed_s
    finishes_per_execution: list[int] = field(repr=False, default_factory=list)
    timeline: dict[str, Any] = field(repr=False, default_factory=dict)  # roles and samples for the plot
    step_records: list[dict[str, Any]] = field(repr=False, default_factory=list)  # tracking-jsonl rows
    # at each step's end: {"t", "cell_s": {phase: {category: cell-s}}, "elapsed": {phase: s}}, cumulative
    # (``gyre.sim.ledger.PHASES``); differences between two give any window's split (``steady_phases``)
    phases_at_step_end: list[dict[str, Any]] = field(repr=False, default_factory=list)

    @property
    def gpus(self) -> int:
        return self.cells * self.gpus_per_cell

    @property
    def vs_ideal(self) -> float:
        """Speed relative to the ideal bound of the same trained work (<= 1)."""
        return self.ideal_time_s / self.wall_time_s

    @property
    def work_rate(self) -> float:
        """Trained work per second of wall time (cell-seconds per second; the cluster's cells at best)."""
        return self.trained_work_cell_s / self.wall_time_s

    @property
    def steady_step_s(self) -> float:
        """Mean step time after the first (which also fills the pipeline): what benchmarks/schedulers.py
        reports as step_time for a real run."""
        ends = self.step_end_s
        return (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else self.wall_time_s / max(1, self.steps)

    @property
    def policy_tokens_per_h(self) -> float:
        """Trained policy tokens per hour of the whole run."""
        return self.trained_policy_tokens / self.wall_time_s * 3600

    def steady_phases(self) -> dict[str, Any]:
        """Where the cell-seconds of the steps after the first went (the first also fills the pipeline), per
        phase: seconds per step in it (``wait_phase_s``, ``step_phase_s``; together ``period_s``, the mean step
        time), each category's share of ``cells x period_s`` spent in it (``wait``, ``step``), and the mean
        number of cells in training while a step runs (``cells_training_in_step``). Needs two completed steps."""
        if len(self.phases_at_step_end) < 2:
            raise ValueError(f"steady_phases needs 2 completed steps, the run has {len(self.phases_at_step_end)}")
        first, last = self.phases_at_step_end[0], self.phases_at_step_end[-1]
        steps = len(self.phases_at_step_end) - 1
        window = last["t"] - first["t"]
        out: dict[str, Any] = {"steps": steps, "period_s": window / steps}
        for phase, cells_s in last["cell_s"].items():
            out[f"{phase}_phase_s"] = (last["elapsed"][phase] - first["elapsed"][phase]) / steps
            out[phase] = {c: (cells_s[c] - first["cell_s"][phase][c]) / (self.cells * window) for c in CATEGORIES}
        training = sum(out["step"][c] for c in TRAINING) * self.cells * window / steps  # cell-seconds per step
        out["cells_training_in_step"] = training / out["step_phase_s"] if out["step_phase_s"] else 0.0
        return out

    def fraction(self, *categories: str) -> float:
        total = sum(self.cell_s[c] for c in self.cell_s)
        return sum(self.cell_s[c] for c in categories) / total if total else 0.0

    @property
    def rollout_idle(self) -> float:
        """Unused throughput of cells while they serve rollouts."""
        side = self.cell_s["rollout_busy"] + self.cell_s["rollout_idle"]
        return self.cell_s["rollout_idle"] / side if side else 0.0

    @property
    def rollout_idle_capped(self) -> float:
        """Unused rollout throughput while the look-ahead (``max_staleness``) allowed no dispatch, over the
        same total as ``rollout_idle``: the share of it no policy under the same bound could have filled."""
        side = self.cell_s["rollout_busy"] + self.cell_s["rollout_idle"]
        return self.rollout_idle_capped_cell_s / side if side else 0.0

    @property
    def train_idle(self) -> float:
        """Time training cells spend not computing (no step, weight pulls, step tail)."""
        side = self.cell_s["train_compute"] + self.cell_s["train_overhead"] + self.cell_s["train_idle"]
        return (self.cell_s["train_overhead"] + self.cell_s["train_idle"]) / side if side else 0.0

    @property
    def gpu_idle(self) -> float:
        """Everything that is not rollout throughput in use or training compute, over cells x wall."""
        return 1.0 - self.fraction("rollout_busy", "train_compute")

    def summary(self) -> dict[str, Any]:
        """Headline numbers (what the table and the JSON show)."""
        return {
            "policy": self.policy, "wall_time_s": self.wall_time_s, "wall_time_h": self.wall_time_s / 3600,
            "mean_step_s": self.wall_time_s / self.steps, "steady_step_s": self.steady_step_s, "ideal_time_s": self.ideal_time_s,
            "vs_ideal": self.vs_ideal, "work_rate": self.work_rate, "length_bias": self.length_bias,
            "length_bias_all": self.length_bias_all, "gpu_idle": self.gpu_idle, "rollout_idle": self.rollout_idle,
            "rollout_idle_capped": self.rollout_idle_capped,
            "train_idle": self.train_idle, "switching": self.fraction("switching"),
            "staleness_mean": self.staleness_mean, "staleness_max": self.staleness_max, "switches": self.switches,
            "dropped": self.dropped, "aborted": self.aborted, "trained": self.trained,
        }

    def breakdown(self) -> dict[str, float]:
        """Fractions of cells x wall per category, with busy rollout split into trained and wasted work."""
        total = self.cells * self.wall_time_s
        out = {c: self.cell_s[c] / total for c in CATEGORIES}
        wasted = min(self.wasted_rollout_cell_s, self.cell_s["rollout_busy"])
        out["rollout_busy_wasted"] = wasted / total
        out["rollout_busy_trained"] = out["rollout_busy"] - out["rollout_busy_wasted"]
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("timeline")
        data.pop("finishes_per_execution")
        data.pop("step_records")
        data.pop("phases_at_step_end")
        data.update(self.summary())
        data["gpus"] = self.gpus
        data["breakdown"] = self.breakdown()
        return data
