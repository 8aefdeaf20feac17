"""Elastic against colocate and against async at its best fixed split, on equal work, in one world.

Speedups are ratios of trained work per hour (``SimResult.work_rate``): every policy is credited only for
the work of the executions it trained, so one that trains the short executions that finish first is not
faster for it. Per-step speedups (wall-time ratios over the same number of steps) are reported beside them.
Async's split is swept (``async_splits``): its best is the split with the most trained work per hour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gyre.sim.config import RootCfg
from gyre.sim.engine import Simulator
from gyre.sim.result import SimResult
from gyre.sim.run import scheduler_config
from gyre.sim.world import World


def async_splits(cells: int, fluid: int, points: int = 5) -> list[int]:
    """Rollout-cell counts to try: the work-ratio split and points spread around it (at most ``points``
    before the refinement that ``best_async`` adds around the best of them)."""
    satellites = cells - 1
    if satellites <= points:
        return list(range(1, satellites + 1))
    spread = {fluid}
    for factor in (0.6, 0.8, 0.9, 1.1, 1.25):
        spread.add(round(fluid * factor))
    picks = sorted(k for k in spread if 1 <= k <= satellites)
    return picks


def run_policy(world: World, root: RootCfg, name: str, rollout_cells: int | None = None) -> SimResult:
    cfg = scheduler_config(root, name, world)
    if rollout_cells is not None:
        cfg.rollout_cells = rollout_cells
    return Simulator(world, cfg).run()


def best_async(world: World, root: RootCfg) -> tuple[SimResult, dict[int, SimResult]]:
    """Async at every split of ``async_splits``, then at the neighbours of the best until neither beats
    it; returns the best (most trained work per hour) and every split tried."""
    cells = root.sim.cells
    tried: dict[int, SimResult] = {}

    def run(k: int) -> SimResult:
        if k not in tried:
            tried[k] = run_policy(world, root, "async", k)
        return tried[k]

    for k in async_splits(cells, world.async_rollout_cells()):
        run(k)
    while True:
        best = max(tried, key=lambda k: tried[k].work_rate)
        step = max(1, round(best * 0.04))
        around = [k for k in (best - step, best + step) if 1 <= k <= cells - 1 and k not in tried]
        if not around:
            break
        for k in around:
            run(k)
        if max(tried, key=lambda k: tried[k].work_rate) == best:
            break
    best = max(tried, key=lambda k: tried[k].work_rate)
    return tried[best], tried


@dataclass
class Comparison:
    colocate: SimResult
    async_best: SimResult
    elastic: SimResult
    async_tried: dict[int, SimResult] = field(default_factory=dict)
    async_planned: int | None = None  # the split a user would plan: rollout cells in proportion to the work

    @property
    def results(self) -> dict[str, SimResult]:
        return {"colocate": self.colocate, "async": self.async_best, "elastic": self.elastic}

    def figures(self) -> dict[str, Any]:
        e, c, a = self.elastic, self.colocate, self.async_best
        return {
            "vs_colocate": e.work_rate / c.work_rate, "vs_async_best": e.work_rate / a.work_rate,
            "vs_ideal": e.vs_ideal, "length_bias": e.length_bias, "length_bias_all": e.length_bias_all,
            # against the split one would plan without sweeping (async's default): what elastic's adapting buys
            "vs_async_planned": (e.work_rate / self.async_tried[self.async_planned].work_rate
                                 if self.async_planned in self.async_tried else float("nan")),
            "per_step_vs_colocate": c.wall_time_s / e.wall_time_s,
            "per_step_vs_async_best": a.wall_time_s / e.wall_time_s,
            "async_best_split": a.rollout_cells, "async_splits_tried": sorted(self.async_tried),
            "colocate_vs_ideal": c.vs_ideal, "async_vs_ideal": a.vs_ideal,
            "max_vs_ideal": max(r.vs_ideal for r in [c, e, *self.async_tried.values()]),
            "colocate_length_bias": c.length_bias, "async_length_bias": a.length_bias,
            "elastic_switches": e.switches, "elastic_aborted": e.aborted, "elastic_dropped": e.dropped,
            "elastic_staleness_mean": e.staleness_mean,
            # elastic's unused rollout throughput, and the part of it while the look-ahead allowed no dispatch
            "elastic_rollout_idle": e.rollout_idle, "elastic_rollout_idle_capped": e.rollout_idle_capped,
            "async_rollout_idle": a.rollout_idle, "async_train_idle": a.train_idle,
            # trained policy tokens per hour: a unit that does not depend on the world's work model, so runs
            # with and without parking compare on it
            **{f"{name}_tokens_per_h": r.policy_tokens_per_h for name, r in self.results.items()},
            "slot_share": e.slot_share, "sessions_per_cell": e.capacity_per_cell, "slots_per_cell": e.slots_per_cell,
            "elastic_parked_tool_share": e.trained_parked_tool_s / e.trained_tool_s if e.trained_tool_s else 0.0,
            "host_s": sum(r.sim_seconds for r in [c, e, *self.async_tried.values()]),
        }


def compare(root: RootCfg, world: World | None = None) -> Comparison:
    world = world or World(root)
    colocate = run_policy(world, root, "colocate")
    best, tried = best_async(world, root)
    elastic = run_policy(world, root, "elastic")
    return Comparison(colocate, best, elastic, tried, world.async_rollout_cells())
