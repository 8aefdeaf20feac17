"""Each policy's decisions on hand-built states."""

from __future__ import annotations

import pytest

from gyre.scheduler import (
    CellView,
    Dispatch,
    Role,
    SchedulerConfig,
    SchedulerState,
    StartTrainStep,
    SwitchCell,
    make_policy,
)

R, T, S = Role.ROLLOUT, Role.TRAIN, Role.SWITCHING


def cells(*roles: Role, capacity: int = 4) -> tuple[CellView, ...]:
    return tuple(CellView(f"c{i}", role, is_core=i == 0, capacity=capacity) for i, role in enumerate(roles))


def state(roles, **kw) -> SchedulerState:
    kw.setdefault("policy_version", 0)
    kw.setdefault("running", 0)
    kw.setdefault("ready", 0)
    kw.setdefault("total_steps", 10)
    kw.setdefault("ready_versions", (kw["policy_version"],) * kw["ready"])
    return SchedulerState(cells=cells(*roles), **kw)


def policy(name, **kw):
    return make_policy(SchedulerConfig(name=name, batch_size=8, **kw))


# colocate -------------------------------------------------------------------------------------------

def test_colocate_dispatches_exactly_one_batch_then_waits_for_the_slowest():
    p = policy("colocate")
    assert p.decide(state([R, R, R, R])) == [Dispatch(8)]
    assert p.decide(state([R, R, R, R], running=3, ready=5)) == []  # stragglers: nobody trains yet


def test_colocate_switches_everyone_to_train_then_steps_then_back():
    p = policy("colocate")
    assert p.decide(state([R, R, R, R], ready=8)) == [SwitchCell(f"c{i}", T) for i in range(4)]
    assert p.decide(state([T, T, S, T], ready=8)) == []  # wait for switches
    assert p.decide(state([T, T, T, T], ready=8)) == [StartTrainStep(8)]
    assert p.decide(state([T, T, T, T], ready=8, training=True)) == []
    assert p.decide(state([T, T, T, T], policy_version=1)) == [SwitchCell(f"c{i}", R) for i in range(4)]


# async ----------------------------------------------------------------------------------------------

def test_async_keeps_a_fixed_split_and_never_stops_rollout():
    p = policy("async", rollout_cells=2, max_staleness=1)
    assert p.decide(state([R, R, R, R])) == [SwitchCell("c0", T), SwitchCell("c3", T), Dispatch(8)]
    # capacity 2 rollout cells x 4 = 8; staleness bound (1 + 1) x 8 = 16 in flight
    assert p.decide(state([T, R, R, T], running=8)) == []
    assert p.decide(state([T, R, R, T], running=4, ready=8)) == [Dispatch(4), StartTrainStep(8)]
    # while a step runs, what is dispatched now trains one version late at best: one batch less ahead
    assert p.decide(state([T, R, R, T], running=4, ready=8, training=True)) == []
    assert p.decide(state([T, R, R, T], running=4, ready=0, training=True)) == [Dispatch(4)]


def test_async_drops_or_keeps_stale_work_by_policy():
    stale = dict(policy_version=3, running=0, ready=10, ready_versions=(0, 0) + (3,) * 8)
    drop = policy("async", rollout_cells=2, max_staleness=1, stale_policy="drop")
    assert StartTrainStep(8, drop_stale=2) in drop.decide(state([T, R, R, T], **stale))
    keep = policy("async", rollout_cells=2, max_staleness=1, stale_policy="keep")
    assert StartTrainStep(8, drop_stale=0) in keep.decide(state([T, R, R, T], **stale))


def test_async_rejects_an_impossible_split():
    with pytest.raises(ValueError, match="rollout_cells=4 must be between 1 and the 3 satellite"):
        policy("async", rollout_cells=4).decide(state([R, R, R, R]))


# elastic --------------------------------------------------------------------------------------------

def test_elastic_core_switches_to_training_as_soon_as_a_batch_is_ready():
    p = policy("elastic", max_staleness=1)
    actions = p.decide(state([R, R, R, R], running=6, ready=8))
    assert actions[0] == SwitchCell("c0", T)
    # dispatch counts the core's capacity as leaving: 3 cells x 4 - 6 running = 6 room, budget 16-6-8=2
    assert actions[1:] == [Dispatch(2)]
    assert p.decide(state([T, R, R, R], running=6, ready=8)) == [StartTrainStep(8), Dispatch(2)]


def test_elastic_satellite_joins_only_while_remaining_capacity_covers_outstanding_work():
    p = policy("elastic", max_staleness=1)  # during a step: 1 batch (8) in flight
    # training; outstanding w = running 3 + budget (8 - 3 - 0) = 8; C_R = 12; C_e = 4 -> 8 <= 8: join,
    # and dispatch fills the capacity that stays: 8 - 3 running = 5
    assert p.decide(state([T, R, R, R], running=3, training=True)) == [SwitchCell("c3", T), Dispatch(5)]
    busy = state([T, R, R, R], running=9, training=True)  # 9 > 8: nobody may leave
    assert not [a for a in p.decide(busy) if isinstance(a, SwitchCell)]


def test_elastic_moves_one_cell_at_a_time_and_returns_when_work_needs_it():
    p = policy("elastic", max_staleness=1)
    # a switch is in flight: nobody else moves, dispatch continues on the serving cells
    assert p.decide(state([T, R, S, R], running=0, training=True)) == [Dispatch(8)]
    # w = 8 running > C_R = 4: bring a satellite back
    assert p.decide(state([T, R, T, T], running=8, training=True)) == [SwitchCell("c3", R)]


def test_elastic_returns_cells_to_rollout_between_steps():
    p = policy("elastic")
    assert p.decide(state([T, R, T, T], running=2, policy_version=1)) == [
        SwitchCell("c0", R), SwitchCell("c2", R), SwitchCell("c3", R), Dispatch(2)]


def test_staleness_zero_dispatches_nothing_while_a_step_runs():
    # on-policy: anything started during the step would be stale by the time it could be trained
    for name in ("async", "elastic"):
        actions = policy(name, max_staleness=0, rollout_cells=2).decide(state([T, R, R, T], training=True))
        assert not [a for a in actions if isinstance(a, Dispatch)], name


def test_all_policies_stop_when_the_run_is_done():
    for name in ("colocate", "async", "elastic"):
        assert policy(name, rollout_cells=1).decide(state([R, R], steps_done=10, total_steps=10)) == []


def test_unknown_policy_and_bad_config_are_clear_errors():
    with pytest.raises(ValueError, match="scheduler.name must be one of"):
        policy("greedy")
    with pytest.raises(ValueError, match="stale_policy"):
        SchedulerConfig(stale_policy="ignore")
