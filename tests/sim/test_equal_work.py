"""Equal-work figures: the ideal bound of what a policy trained is never beaten, length bias says what was
selected, and executions no step can take are aborted at once."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gyre.sim.compare import compare
from gyre.sim.config import load_config
from gyre.sim.engine import Simulator
from gyre.sim.run import scheduler_config, simulate
from gyre.sim.world import World

SMALL = ["sim.steps=3", "sim.workload.calls_mean=12", "sim.rollout.max_sessions=8"]


def random_scenario(rng: random.Random) -> list[str]:
    cells = rng.choice([2, 3, 5, 8])
    group = rng.choice([1, 2, 4])
    batch = group * rng.randint(2, 8)
    return [
        *SMALL, f"sim.cells={cells}", f"scheduler.batch_size={batch}", f"sim.group_size={group}",
        f"scheduler.max_staleness={rng.randint(0, 3)}", f"scheduler.stale_policy={rng.choice(['keep', 'drop'])}",
        f"sim.workload.calls_sigma={rng.uniform(0, 1.5):.2f}", f"sim.workload.tool_s_sigma={rng.uniform(0, 2):.2f}",
        f"sim.workload.tool_s_mean={rng.uniform(0.5, 30):.1f}", f"sim.switch.rollout_to_train_s={rng.uniform(0, 60):.1f}",
        f"sim.switch.train_to_rollout_s={rng.uniform(0, 60):.1f}", f"sim.train.weight_sync_s={rng.uniform(0, 20):.1f}",
        f"sim.train.achieved_tflops_per_gpu={rng.choice([2, 20, 200])}", f"sim.workload.long_share={rng.choice([0, 0.1])}",
        "sim.workload.long_calls_factor=10", f"sim.workload.timeout_s={rng.choice(['null', 600, 3000])}",
        f"trajectory.max_paths={rng.choice(['null', 5])}",
    ]


@pytest.mark.parametrize("seed", range(6))
def test_no_policy_beats_the_ideal_of_the_work_it_trained(seed):
    overrides = random_scenario(random.Random(seed))
    root = load_config(overrides=overrides)
    for result in simulate(root):
        assert 0 < result.vs_ideal <= 1.0, (result.policy, overrides)
        # the bound is the trained work over all cells: the cells did at least that much in the wall time
        assert result.trained_work_cell_s <= result.cells * result.wall_time_s * (1 + 1e-9)
        serving = result.cell_s["rollout_busy"] + result.cell_s["rollout_idle"]
        assert result.trained_rollout_work_cell_s <= serving * (1 + 1e-9)


def test_colocate_trains_what_it_dispatched_and_its_ideal_is_its_own_work(small_heavy_tailed):
    root = load_config(overrides=small_heavy_tailed)
    colocate, async_, elastic = simulate(root)
    assert colocate.length_bias == pytest.approx(1.0) and colocate.length_bias_all == pytest.approx(1.0)
    assert colocate.trained == colocate.dispatched
    for result in (colocate, async_, elastic):
        assert result.ideal_time_s == pytest.approx(result.trained_work_cell_s / result.cells)
        assert result.work_rate == pytest.approx(result.trained_work_cell_s / result.wall_time_s)


def test_dropping_stale_work_selects_against_long_executions_and_keeping_does_not(small_heavy_tailed):
    long_tail = small_heavy_tailed + ["sim.steps=12", "sim.workload.calls_sigma=1.4", "scheduler.max_staleness=1"]
    drop = {r.policy: r for r in simulate(load_config(overrides=long_tail + ["scheduler.stale_policy=drop"]),
                                          ["async", "elastic"])}
    keep = {r.policy: r for r in simulate(load_config(overrides=long_tail), ["async", "elastic"])}
    for name in ("async", "elastic"):
        assert drop[name].length_bias < 0.9 < keep[name].length_bias, name
        assert drop[name].aborted > 0 and keep[name].aborted == 0 and keep[name].dropped == 0


def test_aborted_executions_leave_their_cells_and_are_never_trained(small_heavy_tailed):
    root = load_config(overrides=small_heavy_tailed + ["scheduler.stale_policy=drop", "scheduler.max_staleness=1",
                                                       "sim.workload.calls_sigma=1.4", "sim.steps=8", "sim.drain=true"])
    world = World(root)
    sim = Simulator(world, scheduler_config(root, "elastic", world))
    result = sim.run()
    aborted = np.asarray(sim.aborted_ids)
    assert result.aborted == len(aborted) > 0
    assert not set(sim.aborted_ids) & set(sim.trained_ids)
    assert not any(sim.aborted_ids.count(i) > 1 for i in sim.aborted_ids[:50])
    # every dispatched execution finished once, or was stopped while live (it then never finishes)
    live_aborted = [i for i in aborted if result.finishes_per_execution[i] == 0]
    assert result.finished + len(live_aborted) == result.dispatched
    assert all(result.finishes_per_execution[i] <= 1 for i in range(result.dispatched))
    assert (sim.table.cell[aborted] < 0).all()  # on no cell


def test_async_best_is_the_best_split_tried_and_speedups_are_on_equal_work(small_heavy_tailed):
    comparison = compare(load_config(overrides=small_heavy_tailed))
    best = comparison.async_best
    assert len(comparison.async_tried) >= 3
    assert best.work_rate == max(r.work_rate for r in comparison.async_tried.values())
    figures = comparison.figures()
    assert figures["vs_async_best"] == pytest.approx(comparison.elastic.work_rate / best.work_rate)
    assert figures["vs_colocate"] == pytest.approx(comparison.elastic.work_rate / comparison.colocate.work_rate)
    assert figures["max_vs_ideal"] <= 1.0
