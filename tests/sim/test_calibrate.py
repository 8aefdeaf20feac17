"""calibrate.py fits a preset from a run's jsonl; a simulated run written in that schema round-trips."""

from __future__ import annotations

import json

import pytest

from gyre.sim.calibrate import CalibrationError, fit, fitted_config, main, read_metrics, to_yaml
from gyre.sim.config import CONF_DIR, load_config
from gyre.sim.metrics import write_jsonl
from gyre.sim.run import simulate

# The "real" run: a tiny-model-like cluster (4 one-device cells, batch 16) with a flat decode rate.
TRUTH = [
    "sim.cells=4", "sim.gpus_per_cell=1", "sim.steps=8", "scheduler.batch_size=16", "sim.seed=3",
    "sim.model.total_params_b=0.0004", "sim.model.active_params_b=0.0004", "sim.model.kv_bytes_per_token=0",
    "sim.rollout.max_sessions=8", "sim.rollout.step_overhead_s=0.05", "sim.workload.calls_mean=12",
    "sim.workload.calls_sigma=0.5", "sim.workload.decode_tokens_mean=60", "sim.workload.tool_s_mean=0.3",
    "sim.workload.tool_s_sigma=0.5", "sim.workload.prefill_tokens_mean=200", "sim.workload.timeout_s=null",
    "sim.train.achieved_tflops_per_gpu=0.002", "sim.train.weight_sync_s=0.5", "sim.train.step_overhead_s=0.3",
    "sim.switch.rollout_to_train_s=1.0", "sim.switch.train_to_rollout_s=0.5", "trajectory.max_paths=null",
]


def synthetic_run(tmp_path, policy="colocate"):
    """A run's metrics jsonl in the tracking schema, produced by simulating the TRUTH cluster."""
    [result] = simulate(load_config(overrides=TRUTH), [policy])
    path = tmp_path / f"{policy}.jsonl"
    write_jsonl(path, result.step_records)
    return path, result


def test_fit_recovers_the_run_and_its_step_time(tmp_path):
    path, truth = synthetic_run(tmp_path)
    fitted = fit(read_metrics(path), gpus_per_cell=1, active_params_b=0.0004, tool_fraction=0.05)
    sim = fitted["sim"]
    assert sim["cells"] == 4 and sim["steps"] == 8 and fitted["scheduler"]["batch_size"] == 16
    assert sim["workload"]["calls_mean"] == pytest.approx(12, rel=0.1)
    assert sim["workload"]["calls_sigma"] == pytest.approx(0.5, rel=0.2)
    assert sim["workload"]["decode_tokens_mean"] == pytest.approx(60, rel=0.1)
    assert sim["rollout"]["step_overhead_s"] == pytest.approx(0.05, rel=0.15)  # seconds per decoded token
    assert sim["train"]["achieved_tflops_per_gpu"] == pytest.approx(0.002, rel=0.05)
    assert sim["switch"] == {"rollout_to_train_s": 1.0, "train_to_rollout_s": 0.5}
    # validation: the fitted cluster's simulated step time is within 20% of the "measured" one, per policy
    for policy in ("colocate", "async", "elastic"):
        [measured] = simulate(load_config(overrides=TRUTH), [policy])
        [simulated] = simulate(fitted_config(fitted, ["sim.seed=11"]), [policy])
        assert simulated.wall_time_s / simulated.steps == pytest.approx(measured.wall_time_s / measured.steps, rel=0.2)
    assert truth.wall_time_s > 0


def test_written_preset_is_documented_and_valid(tmp_path):
    path, _ = synthetic_run(tmp_path, "async")
    out = tmp_path / "calibrated.yaml"
    main([str(path), "--out", str(out), "--active-params-b", "0.0004"])
    text = out.read_text()
    assert text.startswith("# @package _global_")
    assert all("#" in line for line in text.splitlines() if ":" in line)
    import yaml

    data = yaml.safe_load(text)
    data["_notes"] = {}
    assert fitted_config(data).sim.name == "calibrated"
    # The run logged each execution: its trace is written beside the preset, one line per execution.
    trace = tmp_path / "calibrated_trace.jsonl"
    assert data["sim"]["workload"]["trace"] == trace.name
    executions = [json.loads(line) for line in trace.read_text().splitlines()]
    runs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(executions) == sum(len(r["rollout/execution_time_s"]) for r in runs)
    assert [len(e["calls"]) for e in executions] == [c for r in runs for c in r["rollout/execution_calls"]]
    tool = sum(call["tool_s"] for e in executions for call in e["calls"])
    assert tool == pytest.approx(sum(t for r in runs for t in r["rollout/tool_time_s"]), rel=1e-4)
    data["sim"]["workload"]["trace"] = str(trace)
    [result] = simulate(fitted_config(data, ["sim.steps=3"]), ["async"])
    assert result.trained == 3 * 16


def test_trace_reproduces_the_measured_durations(tmp_path):
    """Sampling the written trace gives back the run's execution times, tail included."""
    import numpy as np

    from gyre.sim.calibrate import write_trace

    path, _ = synthetic_run(tmp_path)
    rows = read_metrics(path)
    fitted = write_trace(fit(rows, active_params_b=0.0004), tmp_path / "trace.jsonl")
    measured = np.concatenate([r["rollout/execution_time_s"] for r in rows])
    # colocate, one execution per session: an execution's time is its model time at the fitted rate + tool time
    [replay] = simulate(fitted_config(fitted, ["sim.steps=30", "sim.rollout.max_sessions=64"]), ["colocate"])
    replayed = np.concatenate([r["rollout/execution_time_s"] for r in replay.step_records])
    for q in (50, 90, 99):
        assert np.percentile(replayed, q) == pytest.approx(np.percentile(measured, q), rel=0.2), q


def test_summary_statistics_are_accepted(tmp_path):
    rows = [{"step": i, "step_time_s": 100.0, "train/time_s": 10.0 + i,
             "rollout/execution_time_s": {"mean": 80.0, "p50": 70.0, "p90": 140.0, "max": 300.0},
             "rollout/calls_per_execution": {"mean": 20.0, "p50": 18.0, "p90": 35.0},
             "tokens/tree": 1e5 * (1 + i), "tokens/policy": 4e4 * (1 + i), "switch/rollout_to_train_s": [8.0, 9.0],
             "switch/train_to_rollout_s": None, "cells": ["rollout"] * 4,
             "scheduler": {"name": "colocate", "batch_size": 16, "max_staleness": 0}} for i in range(4)]
    path = tmp_path / "summary.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fitted = fit(read_metrics(path))
    assert fitted["sim"]["cells"] == 4
    assert fitted["sim"]["workload"]["calls_sigma"] == pytest.approx(0.5, rel=0.05)  # ln(35/18)/1.2816
    assert fitted["sim"]["switch"]["rollout_to_train_s"] == pytest.approx(8.5)
    assert fitted["sim"]["switch"]["train_to_rollout_s"] == 0.0
    to_yaml(fitted, "summary.jsonl")


def test_bad_metrics_name_the_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"step": 0}\n')
    with pytest.raises(CalibrationError, match=r"bad.jsonl:1: missing field 'step_time_s'"):
        read_metrics(path)
    path.write_text("not json\n")
    with pytest.raises(CalibrationError, match="bad.jsonl:1: not JSON"):
        read_metrics(path)


def test_shipped_calibrated_preset_loads():
    assert (CONF_DIR / "sim" / "calibrated.yaml").is_file()
    root = load_config("calibrated")
    assert root.sim.name == "calibrated"


def test_per_call_spreads_reproduce_the_execution_spread():
    """Spreading an execution's measured CV^2 over its calls: the per-call draws summed give it back."""
    import numpy as np

    from gyre.sim.calibrate import per_call_sigma
    from gyre.sim.workload import lognormal

    rng = np.random.default_rng(0)
    for calls, cv2 in [(18, 0.3), (4, 1.0), (100, 0.05)]:
        sigma = per_call_sigma(cv2, calls)
        totals = lognormal(rng, 1.0, sigma, 200_000 * calls).reshape(-1, calls).sum(axis=1)
        assert totals.var() / totals.mean() ** 2 == pytest.approx(cv2, rel=0.1), (calls, cv2, sigma)
    assert per_call_sigma(0.0, 18) == 0.0


def test_steps_where_nothing_finished_are_skipped(tmp_path):
    """A step can train on executions that finished before the previous step ended: its per-execution
    lists are empty, and the fit uses the other steps."""
    path, _ = synthetic_run(tmp_path, "elastic")
    rows = read_metrics(path)
    full = fit(rows, active_params_b=0.0004)
    for key in ("rollout/execution_time_s", "rollout/model_time_s", "rollout/tool_time_s", "rollout/execution_calls"):
        rows[1][key] = []
    fitted = fit(rows, active_params_b=0.0004)
    assert len(fitted["_trace"]) == len(full["_trace"]) - len(read_metrics(path)[1]["rollout/execution_calls"])
    assert fitted["sim"]["rollout"]["step_overhead_s"] == pytest.approx(full["sim"]["rollout"]["step_overhead_s"], rel=0.3)
    for row in rows:
        row["rollout/execution_time_s"] = []
    with pytest.raises(CalibrationError, match="rollout/execution_time_s is empty in every step"):
        fit(rows, active_params_b=0.0004)


def test_measured_restores_set_the_parking_rates(tmp_path):
    """A run whose router parked sessions logs its restores; the preset then parks, restores by the path
    that took the most time, and at each path's measured rate."""
    path, _ = synthetic_run(tmp_path)
    rows = read_metrics(path)
    assert "parking" not in fit(rows)["sim"]  # nothing parked: the base's parking settings
    for row in rows:
        row.update({"parking/transfer_s": 0.5, "parking/transfer_bytes": 5e9, "parking/recompute_s": 0.1,
                    "parking/recomputed_tokens": 2000})
    fitted = fit(rows)
    assert fitted["sim"]["parking"] == pytest.approx(
        {"enabled": True, "restore": "transfer", "host_gb_s": 10.0, "recompute_tokens_s": 20000.0})
    out = tmp_path / "parked.yaml"
    out.write_text(to_yaml(fitted, "parked.jsonl"))
    import yaml

    assert yaml.safe_load(out.read_text())["sim"]["parking"]["host_gb_s"] == pytest.approx(10.0)
    assert fitted_config(fitted).sim.parking.recompute_tokens_s == pytest.approx(20000.0)
