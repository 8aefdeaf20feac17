"""Each policy's decisions on hand-built states."""

from __future__ import annotations

import pytest

from gyre.scheduler import (
    AbortStale,
    CellView,
    Dispatch,
    Role,
    SchedulerConfig,
    SchedulerState,
    StartTrainStep,
    SwitchCell,
    make_policy,
    version_counts,
)

R, T, S = Role.ROLLOUT, Role.TRAIN, Role.SWITCHING


def cells(*roles: Role, capacity: int = 4, fast: int | None = None) -> tuple[CellView, ...]:
    return tuple(CellView(f"c{i}", role, is_core=i == 0, capacity=capacity, fast_capacity=fast)
                 for i, role in enumerate(roles))


def state(roles, capacity=4, fast=None, **kw) -> SchedulerState:
    kw.setdefault("policy_version", 0)
    kw.setdefault("running", 0)
    kw.setdefault("ready", 0)
    kw.setdefault("total_steps", 10)
    kw.setdefault("ready_versions", version_counts([kw["policy_version"]] * kw["ready"]))
    kw.setdefault("running_versions", version_counts([kw["policy_version"]] * kw["running"]))
    return SchedulerState(cells=cells(*roles, capacity=capacity, fast=fast), **kw)


def policy(name, **kw):
    return make_policy(SchedulerConfig(name=name, batch_size=8, **kw))


def switches(actions, to=None):
    return [a for a in actions if isinstance(a, SwitchCell) and (to is None or a.to == to)]


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
    # capacity 2 rollout cells x 4 = 8; look-ahead (1 + 1) x 8 = 16 in flight
    assert p.decide(state([T, R, R, T], running=8)) == []
    assert p.decide(state([T, R, R, T], running=4, ready=8)) == [Dispatch(4), StartTrainStep(8)]
    # while a step runs, what is dispatched now trains one version late at best: one batch less ahead
    assert p.decide(state([T, R, R, T], running=4, ready=8, training=True)) == []
    assert p.decide(state([T, R, R, T], running=4, ready=0, training=True)) == [Dispatch(4)]


def test_stale_ready_work_is_dropped_only_under_drop_and_kept_by_default():
    stale = {"policy_version": 3, "running": 0, "ready": 10, "ready_versions": version_counts([0, 0] + [3] * 8)}
    drop = policy("async", rollout_cells=2, max_staleness=1, stale_policy="drop")
    assert StartTrainStep(8, drop_stale=2) in drop.decide(state([T, R, R, T], **stale))
    keep = policy("async", rollout_cells=2, max_staleness=1)
    assert keep.cfg.stale_policy == "keep"
    assert StartTrainStep(8, drop_stale=0) in keep.decide(state([T, R, R, T], **stale))


def test_running_executions_no_step_can_take_are_aborted_and_free_their_slots():
    # version 3, a step running: the next step starts at version 4 and takes versions >= 3 (max_staleness 1);
    # 4 executions dispatched at version 1 can never be trained
    busy = {"policy_version": 3, "running": 8, "training": True, "running_versions": version_counts([1] * 4 + [3] * 4)}
    drop = policy("async", rollout_cells=2, max_staleness=1, stale_policy="drop")
    actions = drop.decide(state([T, R, R, T], **busy))
    assert actions[0] == AbortStale(3)
    # the budget and the slots count only the 4 still trainable: one batch ahead (8) - 4 = 4 more
    assert Dispatch(4) in actions
    keep = policy("async", rollout_cells=2, max_staleness=1)
    assert not [a for a in keep.decide(state([T, R, R, T], **busy)) if isinstance(a, (AbortStale, Dispatch))]


def test_async_rejects_an_impossible_split():
    with pytest.raises(ValueError, match="rollout_cells=4 must be between 1 and the 3 satellite"):
        policy("async", rollout_cells=4).decide(state([R, R, R, R]))


# elastic --------------------------------------------------------------------------------------------

def test_elastic_core_switches_to_training_as_soon_as_a_batch_is_ready():
    p = policy("elastic", max_staleness=1)
    actions = p.decide(state([R, R, R, R], running=6, ready=8))
    # with it, the satellite rollout can spare (w = 6 running + 2 ahead fits two cells); dispatch counts
    # both as gone: 2 cells x 4 - 6 running = 2 room, budget 16 - 6 - 8 = 2
    assert actions == [SwitchCell("c0", T), SwitchCell("c3", T), Dispatch(2)]
    assert p.decide(state([T, R, R, T], running=6, ready=8)) == [StartTrainStep(8), Dispatch(2)]


def test_elastic_moves_every_spare_satellite_in_one_decision():
    p = policy("elastic", max_staleness=1)
    # 8 cells of 4; a step runs; w = 3 running + 5 dispatchable (one batch of 8 ahead) = 8 executions:
    # two rollout cells hold it, so the other five satellites join at once
    actions = p.decide(state([T, R, R, R, R, R, R, R], running=3, training=True))
    assert switches(actions, T) == [SwitchCell(f"c{i}", T) for i in (7, 6, 5, 4, 3)]
    assert Dispatch(5) in actions  # onto the two cells that stay
    busy = state([T, R, R, R], running=9, training=True)  # 9 > 12 - 4: nobody may leave
    assert not switches(p.decide(busy))


def test_elastic_joins_no_more_satellites_than_the_step_has_work_for():
    p = policy("elastic", max_staleness=1)
    roles = [T, R, R, R, R, R, R, R]
    # 60 s of one cell's compute left, 10 s to join: with 1 trainer, 60 / 10 - 2 = 4 joiners compute >= 10 s
    actions = p.decide(state(roles, running=3, training=True, train_left_s=60.0, join_s=10.0))
    assert len(switches(actions, T)) == 4
    # almost done: nobody joins (they would arrive after it ended)
    assert not switches(p.decide(state(roles, running=3, training=True, train_left_s=15.0, join_s=10.0)))


def test_elastic_joins_cells_rollout_does_not_need_even_for_a_short_step():
    # cells hold 8 sessions but serve 2 at full speed; w = 4 running + 4 ahead = 8
    roles = [T, R, R, R, R, R, R, R]
    short = dict(capacity=8, fast=2, running=4, training=True, join_s=10.0)
    # 12 s of compute: packing sessions for it is not worth a join (12 / 10 - 2 < 0), but three satellites
    # leave the other four cells at 2 sessions each, so they join (and arrive before the compute ends)
    assert switches(policy("elastic").decide(state(roles, train_left_s=12.0, **short)), T) == \
        [SwitchCell(f"c{i}", T) for i in (7, 6, 5)]
    # 8 s left on one trainer: a joiner would arrive after it ended
    assert not switches(policy("elastic").decide(state(roles, train_left_s=8.0, **short)))


def test_elastic_does_not_pack_sessions_for_a_first_step_of_unknown_size():
    roles = [R] * 8
    # a batch is ready, no step measured yet: the core joins and the satellites rollout can spare at full
    # speed (w = 8 on 7 cells of 2), not all that full capacity would allow
    actions = policy("elastic").decide(state(roles, capacity=8, fast=2, running=4, ready=8))
    assert switches(actions, T) == [SwitchCell(c, T) for c in ("c0", "c7", "c6", "c5")]
    # where full speed and full capacity are the same, as before: every satellite that capacity allows
    assert len(switches(policy("elastic").decide(state(roles, capacity=8, running=4, ready=8)), T)) == 7


def test_elastic_satellites_go_back_once_the_steps_compute_is_done():
    roles = [T, T, T, R]
    # only the optimizer step and the weight sync are left: the satellites spread the sessions, the core stays
    tail = policy("elastic").decide(state(roles, capacity=8, fast=2, running=6, training=True, train_left_s=0.0))
    assert switches(tail, R) == [SwitchCell("c2", R), SwitchCell("c1", R)]
    # while there is compute left they stay
    assert not switches(policy("elastic").decide(state(roles, capacity=8, fast=2, running=6, training=True,
                                                         train_left_s=5.0)))


def test_elastic_satellites_stay_in_training_across_steps_while_the_rule_holds():
    p = policy("elastic", max_staleness=1)
    # step 1 ended (version 1); the next batch is ready; w = 8 fits the two rollout cells: nobody goes back
    actions = p.decide(state([T, T, T, R, R], running=8, ready=8, policy_version=1, steps_done=1))
    assert actions == [StartTrainStep(8)]
    # no batch yet and rollout needs more than it has (w = 8 + 8 ahead = 16 > 8): satellites go back, in bulk
    actions = p.decide(state([T, T, T, R, R], running=8, policy_version=1, steps_done=1))
    assert switches(actions) == [SwitchCell("c2", R), SwitchCell("c1", R)]


def test_elastic_does_not_send_a_cell_back_within_the_step_it_joined():
    p = policy("elastic", max_staleness=1)
    joined = p.decide(state([T, R, R, R], running=3, training=True))
    assert switches(joined, T) == [SwitchCell("c3", T)]
    # same step, the rule would now want rollout capacity back (w = 12 > C_R = 8): c3 stays, it just joined
    assert not switches(p.decide(state([T, R, R, T], running=12, training=True)), R)
    # next phase (the step ended): it may go back
    later = p.decide(state([T, R, R, T], running=12, policy_version=1, steps_done=1))
    assert SwitchCell("c3", R) in later


def test_elastic_counts_only_one_batch_of_look_ahead_as_outstanding_work():
    # max_staleness=4 allows 4 batches ahead during a step; holding rollout cells for all of them would send
    # every satellite back at each step start (thrashing); only the next batch holds cells
    p = policy("elastic", max_staleness=4)
    actions = p.decide(state([T, R, R, R, R, R], running=2, training=True))
    assert p.outstanding(state([T, R, R, R, R, R], running=2, training=True)) == 8
    assert switches(actions, T) == [SwitchCell("c5", T), SwitchCell("c4", T), SwitchCell("c3", T)]
    # the staleness budget still fills whatever capacity stays: 2 cells x 4 - 2 running
    assert Dispatch(6) in actions


def test_elastic_outstanding_work_ignores_executions_that_can_no_longer_be_trained():
    p = policy("elastic", max_staleness=1, stale_policy="drop")
    # 12 running at version 0 while version 2 trains: none can be trained; they are aborted, and the cell
    # their slots held is free for training
    doomed = state([T, R, R, R], running=12, policy_version=2, training=True, running_versions=version_counts([0] * 12))
    assert p.running(doomed) == 0
    actions = p.decide(doomed)
    assert actions[0] == AbortStale(2)
    assert switches(actions, T) == [SwitchCell("c3", T)]  # w = 0 + 8 ahead: two cells stay for it
    keep = policy("elastic", max_staleness=1)  # kept: they still count and fill every rollout cell
    assert keep.running(doomed) == 12
    assert not switches(keep.decide(doomed), T)


def test_elastic_spreads_sessions_over_idle_training_cells_while_no_batch_is_near():
    # cells hold 8 executions but serve 2 at full speed; waiting for a batch, 3 satellites train idle
    p = policy("elastic", max_staleness=1)
    roles = [T, T, T, T, R, R]
    actions = p.decide(state(roles, capacity=8, fast=2, running=6))
    # w = 6 + 10 ahead = 16 against 2 x 2 served at full speed: satellites go back first, then the core
    assert switches(actions, R) == [SwitchCell(f"c{i}", R) for i in (3, 2, 1, 0)]
    # while they switch, only what the serving cells hold at full speed is dispatched (2 x 2 - 6 < 0)
    assert not [a for a in actions if isinstance(a, Dispatch)]
    # half a batch already ready: the next step is near, the idle trainers stay for it
    assert not switches(policy("elastic", max_staleness=1).decide(state(roles, capacity=8, fast=2, running=6, ready=4)))


def test_elastic_sends_a_cell_back_only_if_it_can_return_before_the_batch_is_ready():
    roles = [T, T, T, T, R, R]
    timing = dict(capacity=8, fast=2, running=6, ready=3, join_s=3.0, return_s=2.0)  # a round trip takes 5 s
    # 5 executions short at 1.25 per second: the batch is 4 s away, the idle trainers stay for it
    assert not switches(policy("elastic", max_staleness=1).decide(state(roles, ready_rate=1.25, **timing)))
    # at 0.5 per second it is 10 s away: they serve meanwhile and can be back in time
    actions = policy("elastic", max_staleness=1).decide(state(roles, ready_rate=0.5, **timing))
    assert switches(actions, R) == [SwitchCell(f"c{i}", R) for i in (3, 2, 1, 0)]


def test_elastic_moves_the_steps_trainers_one_join_time_ahead_of_the_batch():
    roles = [R, R, R, R, R, R]
    near = dict(running=8, ready=6, join_s=3.0, return_s=2.0, train_left_s=12.0)
    # 2 executions short at 1 per second: ready in 2 s, within a join (3 s). The core and the satellites
    # the step can use move now: L / d = 4 cells each compute at least their join time, so 3 satellites.
    # No step starts before the batch is complete.
    p = policy("elastic", max_staleness=1)
    actions = p.decide(state(roles, ready_rate=1.0, **near))
    assert switches(actions, T) == [SwitchCell(c, T) for c in ("c0", "c5", "c4", "c3")]
    assert not [a for a in actions if isinstance(a, StartTrainStep)]
    # the moved cells are not sent back while the wait lasts, even if the batch turns out farther away and
    # the serving cells are loaded beyond full speed (a policy that had not moved them would spread)
    later = state([T, R, R, T, T, T], fast=2, ready_rate=0.1, **{**near, "ready": 2})
    assert not switches(p.decide(later))
    assert switches(policy("elastic", max_staleness=1).decide(later), R)
    # 4 s away: nothing moves yet
    assert not switches(policy("elastic", max_staleness=1).decide(state(roles, ready_rate=0.5, **near)))


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
    with pytest.raises(ValueError, match="scheduler.stale_policy"):
        SchedulerConfig(stale_policy="ignore")
    with pytest.raises(ValueError, match="scheduler.max_staleness"):
        SchedulerConfig(max_staleness=-1)


@pytest.mark.parametrize("name", ["async", "elastic"])
def test_a_streaming_step_starts_on_its_first_share_and_keeps_the_look_ahead(name):
    p = policy(name, rollout_cells=2, max_staleness=1, stream_from=0.5)
    roles = [T, R, R, T]
    assert StartTrainStep(8) in p.decide(state(roles, capacity=8, running=4, ready=4))  # half the batch is enough
    assert not [a for a in p.decide(state(roles, capacity=8, running=5, ready=3)) if isinstance(a, StartTrainStep)]
    full = policy(name, rollout_cells=2, max_staleness=1)
    assert not [a for a in full.decide(state(roles, capacity=8, running=4, ready=4)) if isinstance(a, StartTrainStep)]


def test_executions_a_streaming_step_waits_for_count_as_the_batch_being_generated():
    # a step runs holding 4 of its 8; the 4 it waits for are running. Ahead of it: one batch (8) -> 8 more
    # may be dispatched; a step that had its whole batch would leave room for only 8 - 4 running = 4
    p = policy("async", rollout_cells=2, max_staleness=1, stream_from=0.5)
    waiting = p.decide(state([T, R, R, T], capacity=8, running=4, training=True, step_waiting=4))
    assert Dispatch(8) in waiting
    assert Dispatch(4) in p.decide(state([T, R, R, T], capacity=8, running=4, training=True))


def test_stream_from_must_be_a_share_of_the_batch():
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"scheduler.stream_from must be in \(0, 1\], got {bad}"):
            SchedulerConfig(name="elastic", stream_from=bad)
