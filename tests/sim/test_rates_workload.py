"""The workload stream and the rate models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gyre.sim.config import ConfigError, load_config
from gyre.sim.workload import CHUNK, WorkloadStream, lognormal, read_trace
from gyre.sim.world import World


def test_lognormal_is_parametrised_by_its_mean():
    rng = np.random.default_rng(0)
    for sigma in (0.0, 0.5, 1.0):
        draws = lognormal(rng, 40.0, sigma, 200_000)
        assert draws.mean() == pytest.approx(40.0, rel=0.02)
    assert (lognormal(rng, 7.0, 0.0, 5) == 7.0).all()


def test_stream_is_deterministic_and_chunk_independent():
    cfg = load_config().sim.workload
    a, b = WorkloadStream(cfg, seed=1), WorkloadStream(cfg, seed=1)
    whole = a.take(0, CHUNK + 10)
    parts = [b.take(CHUNK - 5, 15), b.take(0, CHUNK - 5)]
    assert np.array_equal(whole.decode[CHUNK - 5:], parts[0].decode)
    assert np.array_equal(whole.decode[:CHUNK - 5], parts[1].decode)
    assert not np.array_equal(WorkloadStream(cfg, seed=2).take(0, 10).decode, whole.decode[:10])


def test_trace_totals_and_errors(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"calls": [{"prefill": 100, "decode": 10, "tool_s": 1.5},
                                           {"prefill": 50, "decode": 20, "tool_s": 0.5}]}) + "\n")
    ex = read_trace(trace)
    assert ex.calls.tolist() == [2] and ex.prefill.tolist() == [150] and ex.decode.tolist() == [30]
    assert ex.tool_s.tolist() == [2.0]
    root = load_config(overrides=[f"sim.workload.trace={trace}"])
    assert World(root).stream.take(0, 3).decode.tolist() == [30, 30, 30]
    trace.write_text('{"calls": [{"prefill": -1}]}\n')
    with pytest.raises(ConfigError, match=r"trace.jsonl:1: calls\[0\].prefill must be a number >= 0"):
        read_trace(trace)
    with pytest.raises(ConfigError, match="no such file"):
        read_trace(tmp_path / "missing.jsonl")


def test_roofline_speed_falls_and_throughput_saturates_with_concurrency():
    rates = World(load_config("deepswe_122b")).rates
    speed = rates.speed[1:]
    assert (np.diff(speed) <= 1e-12).all()  # per-session speed never rises with load
    throughput = np.arange(1, rates.capacity + 1) * speed
    assert (np.diff(throughput) > 0).all()  # but the cell serves more tokens per second
    assert rates.utilisation[0] == 0 and rates.utilisation[-1] == pytest.approx(1.0)
    assert rates.speed[rates.capacity] < 0.6 * rates.speed[1]  # MoE weights + KV reads at full load


def test_kv_capacity_limits_sessions():
    base = World(load_config("deepswe_122b")).rates
    assert not base.kv_limited and base.capacity == 64
    long = World(load_config("deepswe_122b", ["sim.rollout.session_context_tokens=400000"])).rates
    assert long.kv_limited and long.capacity < 64


def test_fixed_point_matches_the_roofline():
    rates = World(load_config("deepswe_122b")).rates
    n = 40
    r = rates.speed[n]
    decoding = (n / rates.engines) * rates.rho / (rates.rho + r)
    assert r == pytest.approx(1.0 / rates.step_time(np.array([decoding]))[0], rel=1e-6)
