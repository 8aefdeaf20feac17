"""Parking in the simulator: parked tool time runs on without a slot, restores are paid, nothing is lost."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_engine import CLOSED_FORM, _check_phases, _run

from gyre.protocol import CallRecord
from gyre.proxy.record_format import encode_record
from gyre.scheduler.parking import ParkRule
from gyre.sim.config import ConfigError, load_config
from gyre.sim.engine import Simulator
from gyre.sim.gaps import read_gaps, session_gaps, write_gaps
from gyre.sim.rates import prefill_s_per_token, restore_s_per_token
from gyre.sim.rollout import ExecutionTable, RolloutPool
from gyre.sim.run import scheduler_config
from gyre.sim.workload import Parking, PerCall, WorkloadStream
from gyre.sim.world import World

PARK = ["sim.parking.enabled=true"]


def test_parking_keeps_the_workload_and_adds_the_rule_s_parked_gaps_and_restores():
    off, on = (World(load_config("deepswe_122b", extra)).stream.take(0, 300) for extra in ([], PARK))
    for column in ("calls", "prefill", "decode", "tool_s"):
        assert np.array_equal(getattr(off, column), getattr(on, column))  # the same executions
    assert not off.parked_s.any() and not off.restore_s.any()
    assert (on.parked_s <= on.tool_s + 1e-9).all() and on.parked_s.sum() > 0.9 * on.tool_s.sum()
    assert (on.restore_s > 0).all()


def test_per_call_totals_follow_the_rule_gap_by_gap():
    """Two executions by hand: a restore is paid before every call that follows a parked gap (not after the
    last call: the execution ends), and costs the context at that gap."""
    calls = PerCall(starts=np.array([0, 3]), prompt=np.array([100.0, 0.0]), prefill=np.array([10.0, 10, 10, 0, 0]),
                    decode=np.array([90.0, 90, 90, 50, 50]), tool_s=np.array([5.0, 0.1, 5.0, 2.0, 9.0]))
    parking = Parking(window=1, prior_s=1.0, restore_s_per_token=0.001, max_context=250)
    totals = calls.totals(parking)
    # execution 0: contexts 200, 300 -> 250 (capped), 250; restores 0.2, 0.25, 0.25 s; the prior (1 s) and its
    # last gaps (5, 0.1) predict gaps of 1, 5, 0.1 s: parks the first two (the third would end it anyway)
    assert totals.parked_s.tolist() == pytest.approx([5.1, 11.0])
    assert totals.restore_s.tolist() == pytest.approx([0.2 + 0.25, 0.05])
    rule = ParkRule(1, 1.0)
    assert [rule.should_park(list(calls.tool_s[:j]), r) for j, r in enumerate([0.2, 0.25, 0.25])] == [True, True, False]
    assert calls.totals(None).restore_s.tolist() == [0.0, 0.0]
    assert totals.calls.tolist() == [3, 2] and totals.decode.tolist() == [270, 100] and totals.prefill.tolist() == [130, 0]


def test_restores_cost_a_host_transfer_or_a_recompute():
    sim = load_config("deepswe_122b", PARK).sim
    assert restore_s_per_token(sim) == sim.model.kv_bytes_per_token / (sim.parking.host_gb_s * 1e9)
    sim = load_config("deepswe_122b", [*PARK, "sim.parking.restore=recompute"]).sim
    assert restore_s_per_token(sim) == prefill_s_per_token(sim)
    sim = load_config("deepswe_122b", [*PARK, "sim.parking.restore=recompute", "sim.parking.recompute_tokens_s=2e4"]).sim
    assert restore_s_per_token(sim) == 1 / 2e4


def test_a_cell_serves_as_many_sessions_as_keep_its_slots_full():
    without, with_ = (World(load_config("deepswe_122b", extra)).rates for extra in ([], PARK))
    assert without.capacity == without.slots == with_.slots and without.slot_share == 1.0
    phi = with_.phi
    assert with_.capacity * phi[with_.capacity] <= with_.slots < (with_.capacity + 1) * phi[with_.capacity] * 1.01
    assert with_.slot_share == with_.slots / with_.capacity < 0.75  # deepswe sessions are in tools a third of the time
    assert 0 < phi[1] < phi[with_.capacity] < 1  # slower decode at load: a larger share of time in a call


def closed_form_pool(parking: bool):
    root = load_config(overrides=CLOSED_FORM + (PARK if parking else []))
    world = World(root)
    table = ExecutionTable()
    pool = RolloutPool(world.rates, 2, table, root.sim.rollout.migration_gb_s, root.sim.rollout.max_context_tokens)
    pool.serving[0] = True
    batch = world.stream.take(0, 16)
    table.add(batch, world.rates.fixed_seconds(batch.prefill, batch.tool_s, batch.restore_s), 0, 0.0, None)
    return world, table, pool


@pytest.mark.parametrize("sessions, without, with_", [(8, 30.0, 30.0), (12, 45.0, 30.0), (16, 60.0, 40.0)])
def test_tool_time_runs_on_while_a_session_is_parked(sessions, without, with_):
    """Closed form: an execution is 10 x (2 s decoding + 1 s tool) = 30 s, and a cell has 8 slots. Without
    parking 12 sessions time-share the slots (45 s each); parked through their tools they need a slot 2/3 of
    their time, so 12 fit (30 s each, tools running meanwhile) and 16 take 16 x 2/3 / 8 x 30 = 40 s."""
    for parking, expected in ((False, without), (True, with_)):
        world, table, pool = closed_form_pool(parking)
        assert world.rates.capacity == (12 if parking else 8)
        pool.place(range(sessions), 0.0)
        assert pool.next_finish(0) == pytest.approx(expected)
        finished = pool.pop_due(0, expected, 1e-9)
        assert sorted(finished) == list(range(sessions))  # each once, all its work done
        assert table.rem_decode[:sessions] == pytest.approx(0.0) and table.rem_fixed[:sessions] == pytest.approx(0.0)
        assert pool.active()[0] == 0 and pool.live == 0


def test_a_switching_cell_moves_only_the_kv_of_sessions_mid_call():
    """A cell leaving rollout parks its sessions: those parked already move nothing, the share in a call
    (``phi``) waits for its KV to migrate, as every session does without parking."""
    delays = {}
    for parking in (False, True):
        root = load_config("deepswe_122b", PARK if parking else [])
        world = World(root)
        table = ExecutionTable()
        pool = RolloutPool(world.rates, 2, table, root.sim.rollout.migration_gb_s, root.sim.rollout.max_context_tokens)
        pool.serving[:] = True
        batch = world.stream.take(0, 40)
        table.add(batch, world.rates.fixed_seconds(batch.prefill, batch.tool_s, batch.restore_s), 0, 0.0, None)
        pool.place(range(40), 0.0)
        pool.advance(1, 100.0)
        active = pool.active()[1]
        pool.serving[1] = False
        moved = pool.evict(1, 100.0)
        delays[parking] = table.delay[moved].copy()
        phi = world.rates.phi[20] if parking else 1.0
        assert active == (round(20 * phi) if parking else 20)
        assert pool.migrations == pytest.approx(20 * phi) and pool.moved_while_parked == pytest.approx(20 * (1 - phi))
    # (within 1%: restores are fixed time, so by t=100 the sessions got slightly less far with parking)
    assert delays[True] == pytest.approx(delays[False] * World(load_config("deepswe_122b", PARK)).rates.phi[20], rel=1e-2)


@pytest.mark.parametrize("policy", ["colocate", "async", "elastic"])
def test_conservation_with_parking(policy, small_heavy_tailed):
    sim, result = _run(policy, small_heavy_tailed + PARK + ["sim.drain=true", "sim.model.kv_bytes_per_token=65536"])
    assert result.parking and result.slot_share < 1 and result.capacity_per_cell > result.slots_per_cell
    assert result.dispatched == result.finished and set(result.finishes_per_execution) == {1}  # none lost or twice
    assert len(set(sim.trained_ids)) == len(sim.trained_ids) == result.trained
    assert result.trained + result.dropped + result.ready_at_end == result.dispatched - result.live_at_end
    assert sum(result.total_cell_s.values()) == pytest.approx(result.cells * result.total_elapsed_s, rel=1e-9)
    assert result.trained_rollout_cell_s + result.wasted_rollout_cell_s == pytest.approx(
        result.cell_s["rollout_busy"], rel=1e-6)
    t, n = sim.table, sim.table.size
    assert t.rem_decode[:n] == pytest.approx(0.0, abs=1e-6) and (t.progress[:n] <= 1).all()
    # every execution took at least its decode at the fastest speed plus all its tool and restore time
    shortest = t.decode0[:n] / sim.rates.speed[1:].max() + t.tool_s[:n] + t.restore_s[:n]
    assert ((t.finish_t[:n] - t.dispatch_t[:n]) >= shortest * (1 - 1e-9)).all()
    assert 0 < result.trained_restore_s and result.trained_parked_tool_s <= result.trained_tool_s
    assert result.vs_ideal <= 1.0
    _check_phases(result)


def test_elastic_trains_on_the_cells_parking_frees_during_a_step():
    """With parking a rollout cell serves more sessions (capacity / slot_share), so while a step runs elastic
    needs fewer cells for the running executions and trains on more: the step's phase gets shorter. The wait
    for the next batch, bound by how long its executions take under the look-ahead, does not."""
    phases = {}
    for parked in (False, True):
        root = load_config("deepswe_122b", ["sim.cells=16", "scheduler.batch_size=512", "sim.steps=5",
                                            *(PARK if parked else [])])
        world = World(root)
        phases[parked] = Simulator(world, scheduler_config(root, "elastic", world)).run().steady_phases()

    assert phases[True]["cells_training_in_step"] > 1.1 * phases[False]["cells_training_in_step"]
    assert phases[True]["step_phase_s"] < 0.95 * phases[False]["step_phase_s"]
    # the wait does not shrink: most of the cycle waits for the batch's executions, which parking does not speed
    assert phases[True]["wait_phase_s"] >= phases[False]["wait_phase_s"] > 0.5 * phases[False]["period_s"]


def test_parking_keys_are_checked_by_name():
    for override, message in (("+sim.parking.nope=1", "unknown config key 'sim.parking.nope'"),
                              ("sim.parking.restore=disk", "sim.parking.restore: must be one of"),
                              ("sim.parking.window=0", "sim.parking.window: must be >= 1"),
                              ("sim.parking.host_gb_s=0", "sim.parking.host_gb_s: must be > 0"),
                              ("sim.parking.prior_s=-1", "sim.parking.prior_s: must be >= 0")):
        with pytest.raises(ConfigError, match=message):
            load_config(overrides=[override])


def record(session: str, start: float, end: float, index: int) -> CallRecord:
    return CallRecord(execution_id=session.split("/")[0], call_id=f"{session}-{index}", agent="main", prompt_ids=[1],
                      response_ids=[2], response_logprobs=[-0.1], weight_version=0,
                      timings={"completed_at": end, "proxy_total_s": end - start}, meta={"session_id": session})


def test_tool_gaps_come_from_the_proxy_s_records_and_replay_scaled(tmp_path):
    """A session's gaps are its calls' starts minus the previous calls' ends (a sub-agent is its own
    session); replayed, each execution's calls take one recorded session's gaps in order, scaled to
    ``tool_s_mean``."""
    records = tmp_path / "records"
    records.mkdir()
    calls = [record("e1/0", 0.0, 1.0, 0), record("e1/1", 1.5, 2.0, 1), record("e1/0", 3.0, 4.0, 2),
             record("e1/0", 4.5, 5.0, 3)]
    (records / "e1.jsonl").write_text("".join(encode_record(c) + "\n" for c in calls))
    sessions = session_gaps(records)
    assert sessions == [[2.0, 0.5]]  # e1/1 made one call: no gap
    gaps_file = tmp_path / "gaps.jsonl"
    write_gaps(sessions, gaps_file)
    assert [g.tolist() for g in read_gaps(gaps_file)] == [[2.0, 0.5]]
    root = load_config(overrides=[f"sim.workload.tool_gaps={gaps_file}", "sim.workload.tool_s_mean=5",
                                  "sim.workload.calls_sigma=0", "sim.workload.calls_mean=3"])
    ex = WorkloadStream(root.sim.workload, 0).take(0, 4)
    assert ex.tool_s.tolist() == pytest.approx([8.0 + 2.0 + 8.0] * 4)  # 2, 0.5, 2 scaled by 5 / 1.25
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"gaps": [1.0, -2.0]}) + "\n")
    with pytest.raises(ConfigError, match="bad.jsonl:1: field 'gaps' must be a non-empty list of seconds >= 0"):
        read_gaps(bad)
    with pytest.raises(ConfigError, match="sim.workload.tool_gaps: no such file"):
        read_gaps(tmp_path / "missing.jsonl")


def test_the_shipped_recorded_gaps_load():
    root = load_config("deepswe_122b", [*PARK, "sim.workload.tool_gaps=tool_gaps_cpu.jsonl"])
    world = World(root)
    assert world.means["tool_s"] == pytest.approx(root.sim.workload.calls_mean * 4.0, rel=0.2)
    assert world.rates.capacity > world.rates.slots


def test_parked_sessions_level_the_serving_cells_at_no_cost():
    """A parked session's next call goes to the least-loaded rollout cell: a cell that starts serving takes
    its share of the others' sessions, moving no KV. Without parking sessions stay where their KV is: only
    what a cell holds beyond its capacity (8 here) moves, as a migration."""
    for parking, after, migrated, moved_parked in ((False, [8, 4], 4, 0), (True, [6, 6], 0, 6)):
        _, table, pool = closed_form_pool(parking)
        pool.place(range(12), 0.0)
        assert pool.n.tolist() == [12, 0]
        pool.advance(0, 5.0)
        done = table.fraction_done(np.arange(12))
        pool.serving[1] = True
        assert pool.rehome(5.0) == {0, 1}
        assert pool.n.tolist() == after
        assert pool.migrations == migrated and pool.moved_while_parked == moved_parked
        assert table.fraction_done(np.arange(12)) == pytest.approx(done)  # progress kept
        assert sorted(pool.residents[0] + pool.residents[1]) == list(range(12))


def test_parked_kv_must_fit_the_host_memory():
    """With transfer restores the parked sessions' KV waits in host memory: beyond its slots a cell serves
    only the sessions whose KV that holds (recompute restores drop it: no bound)."""
    unbounded = World(load_config("deepswe_122b", [*PARK, "sim.parking.host_kv_gb_per_gpu=null"])).rates
    small = World(load_config("deepswe_122b", [*PARK, "sim.parking.host_kv_gb_per_gpu=1"])).rates
    per_session = small.context * small.kv_bytes  # bytes of a session's KV
    assert small.capacity == small.slots + int(8 * 1e9 / per_session) < unbounded.capacity  # 8 GPUs x 1 GB
    recompute = World(load_config("deepswe_122b", [*PARK, "sim.parking.host_kv_gb_per_gpu=1",
                                                   "sim.parking.restore=recompute"])).rates
    assert recompute.capacity > small.capacity  # (recomputes take longer than transfers: 93 here, not 94)
    assert World(load_config("deepswe_122b", PARK)).rates.capacity == unbounded.capacity  # 128 GB/GPU: no bound here
