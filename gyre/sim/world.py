"""What every policy's run shares: the workload stream, the rate models, and what an execution's work costs.

Work. An execution's work is the cell-seconds it needs at the cluster's best efficiency: its decode tokens at
a rollout cell's peak token throughput plus its fixed time (tools, prefill) on one of the cell's session
slots, plus its training FLOPs at a training cell's rate. No schedule can do an execution's work in fewer
cell-seconds (a session on a cell holding ``n`` sessions progresses at most ``1 / n`` of the cell's peak
per second, and the cell's slots are its capacity), so the work of what a policy trained, spread over all
cells, is a lower bound on that policy's wall time: the ideal it is compared with. With parking a cell
serves more sessions (``capacity`` is slots over the share of time a session holds one) and an execution's
fixed time includes its restores: the same bound, over what a cell does with parking.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from gyre.sim.config import RootCfg, SimCfg
from gyre.sim.rates import RolloutRates, TrainRates, restore_s_per_token
from gyre.sim.workload import Parking, WorkloadStream


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


def parking(sim: SimCfg) -> Parking | None:
    """The park rule's inputs when ``sim.parking.enabled`` (None: sessions keep their slots)."""
    if not sim.parking.enabled:
        return None
    return Parking(sim.parking.window, sim.parking.prior_s, restore_s_per_token(sim), sim.rollout.max_context_tokens)


class World:
    def __init__(self, root: RootCfg):
        self.root = root
        self.stream = WorkloadStream(root.sim.workload, root.sim.seed, parking(root.sim))
        self.means = self.stream.means()
        self.rates = RolloutRates(root.sim, self.means)
        self.train = TrainRates(root.sim, root.trajectory.max_paths)

    @functools.cached_property
    def peak_tokens_s(self) -> float:
        """A rollout cell's highest decode throughput over its resident counts (tokens/s)."""
        n = np.arange(len(self.rates.speed))
        return float((n * self.rates.speed).max())

    def rollout_work(self, decode: np.ndarray, fixed_s: np.ndarray) -> np.ndarray:
        """Cell-seconds of rollout an execution needs at best (see the module docstring)."""
        return decode / self.peak_tokens_s + fixed_s / self.rates.capacity

    def train_work(self, tree_tokens: np.ndarray) -> np.ndarray:
        """Cell-seconds of training an execution's (uncapped) tree tokens need."""
        return tree_tokens * self.train.flops_per_token / self.train.cell_flops

    def fastest_seconds(self, decode: np.ndarray, fixed_s: np.ndarray) -> np.ndarray:
        """Wall seconds an execution takes alone on a cell (its fastest), cut at ``sim.workload.timeout_s``."""
        seconds = decode / float(self.rates.speed[1:].max()) + fixed_s
        timeout = self.root.sim.workload.timeout_s
        return seconds if timeout is None else np.minimum(seconds, timeout)

    def kept_fraction(self, decode: np.ndarray, fixed_s: np.ndarray) -> np.ndarray:
        """Share of an execution that runs before ``sim.workload.timeout_s`` at full-capacity speed (1 without
        a timeout): what its nominal work counts, for every policy alike."""
        timeout = self.root.sim.workload.timeout_s
        if timeout is None:
            return np.ones_like(decode, dtype=float)
        seconds = decode / self.rates.speed[self.rates.capacity] + fixed_s
        return np.minimum(1.0, timeout / np.maximum(seconds, 1e-300))

    def execution_costs(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(rollout cell-seconds at full capacity, trained tree tokens) of executions ``start..``.

        An execution that would outlive ``sim.workload.timeout_s`` is cut there, and so are its tokens.
        """
        ex = self.stream.take(start, count)
        cap = self.rates.capacity
        seconds = ex.decode / self.rates.speed[cap] + self.rates.fixed_seconds(ex.prefill, ex.tool_s, ex.restore_s)
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
