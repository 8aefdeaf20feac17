"""What every policy's run shares: the workload stream, the rate models, and the ideal bound."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from gyre.sim.config import RootCfg
from gyre.sim.rates import RolloutRates, TrainRates
from gyre.sim.workload import WorkloadStream


@dataclass
class Ideal:
    """Total work of ``executions`` executions over all GPUs with no idling, no switching, no waste."""

    time_s: float
    rollout_cell_s: float  # at full-capacity concurrency (the most throughput a cell gives)
    train_cell_s: float
    executions: int

    def to_dict(self) -> dict[str, float]:
        return {"time_s": self.time_s, "rollout_cell_s": self.rollout_cell_s, "train_cell_s": self.train_cell_s,
                "executions": self.executions}


class World:
    def __init__(self, root: RootCfg):
        self.root = root
        self.stream = WorkloadStream(root.sim.workload, root.sim.seed)
        self.means = self.stream.means()
        self.rates = RolloutRates(root.sim, self.means)
        self.train = TrainRates(root.sim, root.trajectory.max_paths)

    def execution_costs(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(rollout cell-seconds at full capacity, trained tree tokens) of executions ``start..``.

        An execution that would outlive ``sim.workload.timeout_s`` is cut there, and so are its tokens.
        """
        ex = self.stream.take(start, count)
        cap = self.rates.capacity
        seconds = ex.decode / self.rates.speed[cap] + self.rates.fixed_seconds(ex.prefill, ex.tool_s)
        kept = np.ones_like(seconds)
        timeout = self.root.sim.workload.timeout_s
        if timeout is not None:
            kept = np.minimum(1.0, timeout / np.maximum(seconds, 1e-300))
            seconds = np.minimum(seconds, timeout)
        return seconds / cap, ex.tree_tokens * kept

    @functools.cached_property
    def ideal(self) -> Ideal:
        """Lower bound on wall time: the steps' rollout and training work spread over every cell."""
        needed = self.root.sim.steps * self.root.scheduler.batch_size
        rollout, tokens = self.execution_costs(0, needed)
        train = self.train.flops(float(tokens.sum())) / self.train.cell_flops
        cells = self.root.sim.cells
        return Ideal((float(rollout.sum()) + train) / cells, float(rollout.sum()), train, needed)

    def async_rollout_cells(self) -> int:
        """Async's fixed split when ``scheduler.rollout_cells`` is null: cells in proportion to the work.

        Rollout cells take the share of the ideal work that is rollout, so neither pool starves the other
        in steady state (the fluid optimum of a fixed split); at least one cell trains (the core).
        """
        ideal = self.ideal
        share = ideal.rollout_cell_s / (ideal.rollout_cell_s + ideal.train_cell_s)
        cells = self.root.sim.cells
        return int(min(cells - 1, max(1, round(cells * share))))
