"""The event loop applies policy actions faithfully and conserves executions and GPU-seconds."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import ZERO_VARIANCE

from gyre.scheduler import (
    ColocatePolicy,
    Dispatch,
    Policy,
    Role,
    SchedulerConfig,
    StartTrainStep,
    SwitchCell,
)
from gyre.sim.config import load_config
from gyre.sim.engine import SimulationError, Simulator
from gyre.sim.ledger import CATEGORIES, PHASES
from gyre.sim.rollout import ExecutionTable, RolloutPool
from gyre.sim.run import scheduler_config, simulate
from gyre.sim.world import World

# Closed-form cluster: 4 one-GPU cells, dense 1B model, flat decode of exactly 50 tokens/s per session.
CLOSED_FORM = [
    "sim.cells=4", "sim.gpus_per_cell=1", "sim.steps=3", "scheduler.batch_size=32",
    "sim.model.total_params_b=1", "sim.model.active_params_b=1", "sim.model.weight_bytes=1",
    "sim.model.kv_bytes_per_token=0", "sim.hardware.hbm_tb_s=1", "sim.hardware.bw_efficiency=1",
    "sim.hardware.peak_tflops=1000", "sim.hardware.decode_mfu=0.5", "sim.rollout.step_overhead_s=0.019",
    "sim.rollout.max_sessions=8", "sim.workload.calls_mean=10", "sim.workload.calls_sigma=0",
    "sim.workload.decode_tokens_mean=100", "sim.workload.decode_tokens_sigma=0", "sim.workload.prefill_tokens_mean=0",
    "sim.workload.prompt_tokens_mean=0", "sim.workload.tool_s_mean=1", "sim.workload.tool_s_sigma=0",
    "sim.workload.timeout_s=null", "sim.train.achieved_tflops_per_gpu=4", "sim.train.weight_sync_s=2",
    "sim.train.step_overhead_s=1", "trajectory.max_paths=null", "sim.policies=[colocate]",
]


def test_colocate_equals_its_closed_form():
    # By hand: a decode iteration is 0.019 s overhead + 1 GB of weights / 1 TB/s = 0.02 s (compute for 8
    # sessions is 8 x 2e9 / 5e14 = 3e-5 s, under the memory time), so 50 tokens/s per session at any load.
    # One execution: 10 calls x (100 tokens / 50 + 1 s tool) = 30 s; 32 of them spread 8 per cell all end
    # together. Training: 32 x 10 x 100 tokens x 6 x 1e9 FLOPs / (4 cells x 4 TFLOP/s) = 12 s.
    # A step: rollout 30 + switch to train 8.52 + compute 12 + step overhead 1 + weight sync 2 = 53.52 s,
    # and 3.46 s back to rollout between steps (not after the last one).
    root = load_config(overrides=CLOSED_FORM)
    world = World(root)
    assert world.rates.speed[8] == pytest.approx(50.0)
    [result] = simulate(root, world=world)
    expected = 3 * (30 + 8.52 + 12 + 1 + 2) + 2 * 3.46
    assert result.wall_time_s == pytest.approx(expected, rel=1e-9)
    assert result.step_end_s == pytest.approx([53.52, 53.52 * 2 + 3.46, 53.52 * 3 + 2 * 3.46], rel=1e-9)
    assert result.switches == 4 * (2 * 3 - 1)
    assert result.staleness_max == 0 and result.dropped == 0
    # the ideal bound by hand: 96 executions x 30 s / 8 sessions per cell + 3 x 12 s x 4 cells, over 4 cells
    assert result.ideal_time_s == pytest.approx((96 * 30 / 8 + 3 * 12 * 4) / 4)


def _run(policy, overrides):
    """One policy over a config; (the simulator, for its logs, and its result)."""
    root = load_config(overrides=overrides)
    world = World(root)
    sim = Simulator(world, scheduler_config(root, policy, world))
    return sim, sim.run()


@pytest.mark.parametrize("policy, stream_from", [("colocate", 1.0), ("async", 1.0), ("elastic", 1.0),
                                                 ("async", 0.25), ("elastic", 0.25)])
def test_conservation(policy, stream_from, small_heavy_tailed):
    sim, result = _run(policy, small_heavy_tailed + ["sim.drain=true", f"scheduler.stream_from={stream_from}"])
    # every dispatched execution finishes exactly once (the drain lets the last ones end)
    assert result.dispatched == result.finished == len(result.finishes_per_execution)
    assert set(result.finishes_per_execution) == {1}
    # at the end of the last step each finished one was trained, dropped, or is still ready: once
    assert len(set(sim.trained_ids)) == len(sim.trained_ids) == result.trained == 4 * 48
    assert not set(sim.trained_ids) & set(sim.dropped_ids)
    assert result.trained + result.dropped + result.ready_at_end == result.dispatched - result.live_at_end
    # GPU-seconds by role add up to cells x GPUs x time, to the last step's end and through the drain
    gpus = result.cells * result.gpus_per_cell
    assert sum(result.cell_s.values()) * result.gpus_per_cell == pytest.approx(gpus * result.wall_time_s, rel=1e-9)
    assert sum(result.total_cell_s.values()) == pytest.approx(result.cells * result.total_elapsed_s, rel=1e-9)
    assert all(value >= -1e-6 for value in result.cell_s.values())
    # trained rollout work never exceeds what the rollout cells actually did
    assert result.trained_rollout_cell_s + result.wasted_rollout_cell_s == pytest.approx(
        result.cell_s["rollout_busy"], rel=1e-6)
    _check_phases(result)


def _check_phases(result):
    """The same cell-seconds split by phase (no step running / one running) add up to the whole, by category
    and in time, and nothing computes outside a step."""
    at_end = result.phases_at_step_end[-1]
    assert at_end["t"] == result.wall_time_s and len(result.phases_at_step_end) == result.steps
    for category, total in result.cell_s.items():
        assert sum(at_end["cell_s"][phase][category] for phase in PHASES) == pytest.approx(total, rel=1e-9, abs=1e-6)
    assert sum(at_end["elapsed"].values()) == pytest.approx(result.wall_time_s, rel=1e-9)
    assert at_end["cell_s"]["wait"]["train_compute"] == 0.0 < at_end["cell_s"]["step"]["train_compute"]
    steady = result.steady_phases()
    assert steady["period_s"] == pytest.approx(result.steady_step_s, rel=1e-9)
    assert steady["wait_phase_s"] + steady["step_phase_s"] == pytest.approx(steady["period_s"], rel=1e-9)
    assert sum(steady[phase][c] for phase in PHASES for c in CATEGORIES) == pytest.approx(1.0, rel=1e-9)
    assert 0 < steady["cells_training_in_step"] <= result.cells * (1 + 1e-9)


def _pool(overrides=()):
    root = load_config("deepswe_122b", list(overrides))
    world = World(root)
    table = ExecutionTable()
    pool = RolloutPool(world.rates, 2, table, root.sim.rollout.migration_gb_s, root.sim.rollout.max_context_tokens)
    pool.serving[:] = True
    batch = world.stream.take(0, 4)
    table.add(batch, world.rates.fixed_seconds(batch.prefill, batch.tool_s), 0, 0.0, None)
    return world, table, pool


def test_switching_cell_hands_its_sessions_over_with_kv_migration_cost():
    world, table, pool = _pool()
    assert pool.place(range(4), 0.0) == {0, 1} and pool.n.tolist() == [2, 2]
    pool.advance(1, 100.0)
    moved_ids = list(pool.residents[1])
    done = table.fraction_done(np.array(moved_ids))
    pool.serving[1] = False
    moved = pool.evict(1, 100.0)
    assert moved == moved_ids and pool.n.tolist() == [2, 0]
    context = np.minimum(world.root.sim.rollout.max_context_tokens, table.tree_tokens[moved] * done)
    expected = context * world.root.sim.model.kv_bytes_per_token / (world.root.sim.rollout.migration_gb_s * 1e9)
    assert table.delay[moved] == pytest.approx(expected)
    assert (table.delay[moved] > 0).all()
    assert pool.place(moved, 100.0) == {0} and pool.n.tolist() == [4, 0]
    # progress is not lost: remaining work is what was left at t=100, plus the migration delay first
    assert table.fraction_done(np.array(moved)) == pytest.approx(done)


def test_overloaded_cell_time_shares_and_a_new_cell_takes_the_excess():
    world, table, pool = _pool(["sim.rollout.max_sessions=1"])  # capacity 2 per cell (2 engines)
    pool.serving[1] = False
    pool.place(range(4), 0.0)
    assert pool.n.tolist() == [4, 0]
    alone = world.rates.duration(table.decode0[:1], table.fixed0[:1], 2)[0]
    shared = world.rates.duration(table.decode0[:1], table.fixed0[:1], 4)[0]
    assert shared == pytest.approx(2 * alone)  # 4 sessions on 2 slots: each progresses half as fast
    pool.serving[1] = True
    assert pool.rehome(0.0) == {0, 1} and pool.n.tolist() == [2, 2]


class Script(Policy):
    """Test double: returns fixed actions when a condition on the state first holds."""

    name = "script"

    def __init__(self, cfg, plan):
        super().__init__(cfg)
        self.plan = list(plan)

    def decide(self, state):
        for index, (condition, actions) in enumerate(self.plan):
            if condition(state):
                del self.plan[index]
                return actions
        return []


def _scripted(plan, overrides=()):
    root = load_config(overrides=CLOSED_FORM + ["sim.steps=1", *overrides])
    world = World(root)
    cfg = SchedulerConfig(name="colocate", batch_size=32)
    return Simulator(world, cfg, Script(cfg, plan)).run(), world


def test_a_satellite_joining_mid_step_pulls_weights_then_shares_the_rest():
    plan = [
        (lambda s: s.steps_done == 0 and s.running == 0 and s.ready == 0, [SwitchCell("c0", Role.TRAIN), Dispatch(24)]),
        (lambda s: s.ready == 24 and not s.training, [StartTrainStep(24), SwitchCell("c1", Role.TRAIN)]),
    ]
    result, world = _scripted(plan)
    flops = 24 * 1000 * 6e9
    cell = world.train.cell_flops  # 4 TFLOP/s
    lag = 8.52 + 2.0  # c1 switches, then pulls the weights
    compute = lag + (flops - lag * cell) / (2 * cell)
    assert result.train_compute_s == pytest.approx([compute])
    assert result.step_records[0]["train/time_s"] == pytest.approx(compute + 1 + 2)


def test_a_cell_leaving_mid_step_stops_taking_micro_batches():
    plan = [
        (lambda s: s.steps_done == 0 and s.ready == 0 and s.running == 0,
         [SwitchCell("c0", Role.TRAIN), SwitchCell("c1", Role.TRAIN), Dispatch(16)]),
        (lambda s: s.ready == 16 and not s.training, [StartTrainStep(16)]),
        (lambda s: s.training, [SwitchCell("c1", Role.ROLLOUT)]),
    ]
    result, world = _scripted(plan)
    assert result.train_compute_s == pytest.approx([16 * 1000 * 6e9 / world.train.cell_flops])


def test_impossible_actions_and_stalls_are_clear_errors():
    with pytest.raises(SimulationError, match="stalled at t=0.0s"):
        _scripted([])
    with pytest.raises(SimulationError, match=r"StartTrainStep\(count=32, drop_stale=0\) but 0 executions are ready"):
        _scripted([(lambda s: True, [SwitchCell("c0", Role.TRAIN)]),
                   (lambda s: s.cells[0].role == Role.TRAIN, [StartTrainStep(32)])])
    with pytest.raises(SimulationError, match="unknown cell 'c9'"):
        _scripted([(lambda s: True, [SwitchCell("c9", Role.TRAIN)])])


def test_a_decision_tick_barely_moves_the_results(small_heavy_tailed):
    exact = {r.policy: r for r in simulate(load_config(overrides=small_heavy_tailed))}
    ticked = {r.policy: r for r in simulate(load_config(overrides=small_heavy_tailed + ["sim.decide_interval_s=1"]))}
    for name, result in exact.items():
        assert ticked[name].wall_time_s == pytest.approx(result.wall_time_s, rel=0.03)
        assert ticked[name].decide_calls <= result.decide_calls


class QuarterConcurrencyColocate(ColocatePolicy):
    """Colocate that keeps at most a quarter of its batch running although its rule allows the whole batch."""

    def decide(self, state):
        room = self.cfg.batch_size // 4 - state.running
        actions = []
        for action in super().decide(state):
            if isinstance(action, Dispatch):
                action = Dispatch(min(action.count, room)) if room > 0 else None
            if action is not None:
                actions.append(action)
        return actions


def test_idle_rollout_is_capped_only_while_the_rule_allows_no_dispatch(small_heavy_tailed):
    # 8 cells of 8 sessions and a batch of 8 at staleness 1: at most 16 executions in flight, so most of
    # elastic's rollout throughput is idle, and nearly all of it because the look-ahead allows no more.
    _, bound = _run("elastic", small_heavy_tailed + ["sim.steps=2", "scheduler.batch_size=8"])
    assert bound.rollout_idle > 0.5
    assert 0.9 * bound.rollout_idle <= bound.rollout_idle_capped <= bound.rollout_idle
    # Equal executions run in four waves when a quarter of the batch runs at a time: only the last wave
    # runs with the whole batch out, so about a quarter of the idle throughput is capped; plain colocate
    # dispatches the batch at once and all its idle throughput is.
    config = ["sim.cells=4", "sim.steps=2", "scheduler.batch_size=16", "sim.rollout.max_sessions=8", *ZERO_VARIANCE]
    root = load_config(overrides=config)
    world = World(root)
    cfg = scheduler_config(root, "colocate", world)
    quarter = Simulator(world, cfg, QuarterConcurrencyColocate(cfg)).run()
    _, colocate = _run("colocate", config)
    assert quarter.rollout_idle_capped == pytest.approx(quarter.rollout_idle / 4, rel=0.2)
    assert colocate.rollout_idle > 0.3  # 16 executions on 32 sessions' worth of cells
    assert colocate.rollout_idle_capped == pytest.approx(colocate.rollout_idle, rel=1e-6)


def test_orphaned_sessions_pause_and_time_out_once_placed():
    # 2 cells; the scripted policy moves both to training with sessions live: they have nowhere to go.
    plan = [
        (lambda s: s.steps_done == 0 and s.running == 0 and s.ready == 0, [Dispatch(4)]),
        (lambda s: s.running == 4, [SwitchCell("c0", Role.TRAIN), SwitchCell("c1", Role.TRAIN)]),
        (lambda s: s.cells[0].role == Role.TRAIN and s.cells[1].role == Role.TRAIN, [SwitchCell("c1", Role.ROLLOUT)]),
        (lambda s: s.ready == 4, [StartTrainStep(4)]),
    ]
    result, _ = _scripted(plan, ["sim.cells=2", "sim.workload.timeout_s=10", "sim.switch.rollout_to_train_s=20"])
    # timed out at dispatch + 10 s, but only noticed when c1 serves again at 20 + 3.46 s
    assert result.timed_out == 4 and result.trained == 4
    assert result.step_records[0]["rollout/execution_time_s"] == pytest.approx([23.46] * 4)


@pytest.mark.parametrize("policy", ["colocate", "async", "elastic"])
def test_groups_are_trained_whole_once_their_last_member_finishes(policy, small_heavy_tailed):
    sim, result = _run(policy, small_heavy_tailed + ["sim.group_size=4"])
    assert result.dispatched % 4 == 0 and result.trained == 4 * 48
    for step in sim.step_log:
        members = Counter(ident // 4 for ident in step["ids"])
        assert set(members.values()) == {4}, members  # whole groups only
        assert sim.table.finish_t[step["ids"]].max() <= step["start"]  # all members had finished


def test_groups_cost_colocate_nothing_and_slow_async_down(small_heavy_tailed):
    """Colocate waits for the whole batch anyway; async keeps a finished member's slot until its group
    completes (as the driver counts it), so its throughput drops under heavy tails."""
    single, grouped = (simulate(load_config(overrides=small_heavy_tailed + [f"sim.group_size={g}"]),
                                ["colocate", "async"]) for g in (1, 8))
    assert grouped[0].wall_time_s == pytest.approx(single[0].wall_time_s, rel=1e-9)
    assert grouped[1].wall_time_s > 1.05 * single[1].wall_time_s


@pytest.mark.parametrize("policy", ["async", "elastic"])
def test_a_streaming_step_starts_on_part_of_its_batch_and_trains_all_of_it(policy, small_heavy_tailed):
    overrides = small_heavy_tailed + ["sim.group_size=4"]
    sim, result = _run(policy, overrides + ["scheduler.stream_from=0.25"])
    assert result.trained == 4 * 48
    started_early = 0
    for step in sim.step_log:
        assert len(step["ids"]) == 48  # the whole batch, in whole groups, each finished before the step ended
        assert set(Counter(ident // 4 for ident in step["ids"]).values()) == {4}
        finished = sim.table.finish_t[step["ids"]]
        assert finished.max() <= step["end"]
        started_early += finished.max() > step["start"]
    assert started_early >= 2  # steps began before their last groups were in
    _, whole = _run(policy, overrides)
    assert result.wall_time_s < whole.wall_time_s  # training overlapped the batch's tail
    assert result.vs_ideal <= 1.0
