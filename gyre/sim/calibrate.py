"""Fit a simulator preset from the jsonl metrics of a real Gyre run.

    python -m gyre.sim.calibrate RUN.jsonl [--out conf/sim/calibrated.yaml] [--gpus-per-cell 1]
    python -m gyre.sim +sim=calibrated            # then simulate the fitted cluster

Input schema (one JSON object per line, one line per training step, as written by ``gyre/tracking.py``;
``gyre/sim/metrics.py`` writes the same from a simulated run):

    step                          int    step index
    step_time_s                   float  wall time of the step (previous step's end to this one's end)
    train/time_s                  float  time of the training phase (step start to new weights out)
    rollout/execution_time_s      list[float] wall times of the executions finished since the previous
                                  step (may be empty), or {"mean", "p50", "p90", "max"} (p50 and p90
                                  needed for the spread)
    rollout/calls_per_execution   list[int] or {"mean", "p50", "p90", "max"}: model calls of each
                                  execution trained this step
    tokens/tree                   float  tokens in the step's trained trees (after the max_paths cap)
    tokens/policy                 float  policy-generated tokens among them
    switch/rollout_to_train_s     float | list[float] | null  role-switch times seen in the step
    switch/train_to_rollout_s     float | list[float] | null
    cells                         int (cell count) or list (one entry per cell)
    scheduler                     str (policy name) or {"name", "batch_size", "max_staleness", "rollout_cells"}
  optional:
    rollout/tool_time_s           list[float] or summary: per-execution seconds outside model calls (tools,
                                  harness start-up, scoring); else --tool-fraction of the execution time
    rollout/model_time_s          list[float] or summary: per-execution seconds inside model calls
    rollout/execution_calls       list[int]: calls of each execution of rollout/execution_time_s (with the
                                  two lists above, the run's executions become a trace)
    train/weight_sync_s           float  weight-sync time inside train/time_s (else 0)
    train/cells                   int    cells that trained this step (else: all for colocate, the
                                         complement of rollout_cells for async, all for elastic)
    cells/capacity                int    executions one rollout cell serves at once (the scheduler's C_e;
                                         else ceil(batch x (max_staleness + 1) / cells))
    group_size                    int    samples per task (GRPO group; else 1)
    parking/transfer_s            float  seconds restoring parked KV from host memory this step (with
    parking/transfer_bytes        float  the bytes it moved: the host link's rate, sim.parking.host_gb_s)
    parking/recompute_s           float  seconds recomputing dropped KV this step (with
    parking/recomputed_tokens     float  the tokens recomputed: sim.parking.recompute_tokens_s)

What is fitted (everything else keeps conf/sim_config.yaml's value):
- calls per execution: log-normal mean and log-space sigma;
- decode and new-prefill tokens per call from tokens/policy and tokens/tree (tree tokens are already capped,
  so the preset uses trajectory.max_paths=null with ratio 1);
- per-token decode time from the model-call time (measured, or the execution time less --tool-fraction
  of it); the rate model is made flat (no concurrency dependence: one run at one concurrency cannot tell
  the roofline's shape);
- per-call log-normal spreads of decode tokens and tool seconds chosen so that their sums over an
  execution reproduce the measured per-execution spreads (squared coefficient of variation) of the model
  and tool times, net of the call-count spread;
- training: least squares of train/time_s on tokens/tree (slope -> achieved FLOP/s per GPU with
  --active-params-b, intercept -> step overhead), switch costs as measured means;
- parking, when the run's router parked sessions (``parking/*`` logged): ``sim.parking.enabled``, the restore
  path it used most (by seconds) and each path's measured rate (bytes or tokens over seconds, all steps).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gyre.sim.config import RootCfg, load_config, validate

Z90 = 1.2815515655446004  # standard normal 90th percentile


class CalibrationError(ValueError):
    """The metrics file cannot be fitted; the message names the line and field."""


@dataclass
class Spread:
    """A positive quantity's mean, log-space sigma (what a mean-parametrised log-normal needs) and squared
    coefficient of variation (what a sum of per-call draws must reproduce)."""

    mean: float
    sigma: float
    cv2: float


def spread(value: Any, where: str) -> Spread:
    """From a list of samples or a {mean, p50, p90} summary (whose CV is the log-normal one of its sigma)."""
    if isinstance(value, list):
        xs = np.asarray([v for v in value if isinstance(v, (int, float)) and v > 0], dtype=float)
        if len(xs) == 0:
            raise CalibrationError(f"{where}: no positive numbers in the list")
        if len(xs) == 1:
            return Spread(float(xs[0]), 0.0, 0.0)
        return Spread(float(xs.mean()), float(np.log(xs).std()), float(xs.var() / xs.mean() ** 2))
    if isinstance(value, dict):
        if "mean" not in value:
            raise CalibrationError(f"{where}: a summary needs 'mean' (and 'p50', 'p90' for the spread)")
        sigma = 0.0
        if value.get("p50") and value.get("p90"):
            sigma = max(0.0, math.log(value["p90"] / value["p50"]) / Z90)
        return Spread(float(value["mean"]), sigma, math.expm1(sigma**2))
    raise CalibrationError(f"{where}: expected a list of numbers or a {{mean, p50, p90}} summary, got {value!r}")


def pooled(spreads: list[Spread], weights: list[float]) -> Spread:
    """Combine per-step spreads (weighted by executions): pooled mean, root-mean-square sigma, mean CV^2."""
    w = np.asarray(weights, dtype=float)
    means = np.asarray([s.mean for s in spreads])
    sigmas = np.asarray([s.sigma for s in spreads])
    cv2 = np.asarray([s.cv2 for s in spreads])
    return Spread(float((w * means).sum() / w.sum()), float(math.sqrt((w * sigmas**2).sum() / w.sum())),
                  float((w * cv2).sum() / w.sum()))


def per_call_sigma(execution_cv2: float, calls: float) -> float:
    """Log-space sigma of per-call draws whose sum over ``calls`` calls has the execution's CV^2.

    A sum of n independent log-normals of sigma s has CV^2 = (e^(s^2) - 1) / n, so s^2 = log(1 + n CV^2).
    (Fitting the execution's own sigma to each call instead would shrink the spread by sqrt(n).)"""
    return min(2.5, math.sqrt(math.log1p(max(1.0, calls) * max(0.0, execution_cv2))))


def _lists(rows: list[dict[str, Any]], key: str) -> list[Any]:
    """The rows' values of ``key`` (steps where no execution finished log an empty list: skipped)."""
    return [r[key] for r in rows if key in r and r[key] != []]


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    rows = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CalibrationError(f"{path}:{lineno}: not JSON ({exc.msg})") from exc
        for key in ("step", "step_time_s", "train/time_s", "rollout/execution_time_s", "rollout/calls_per_execution",
                    "tokens/tree", "tokens/policy", "cells", "scheduler"):
            if key not in row:
                raise CalibrationError(f"{path}:{lineno}: missing field {key!r}")
        row["_where"] = f"{path}:{lineno}"
        rows.append(row)
    if not rows:
        raise CalibrationError(f"{path}: no steps")
    return rows


def _count(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _mean_of(values: list[Any]) -> float | None:
    flat: list[float] = []
    for v in values:
        if isinstance(v, list):
            flat += [x for x in v if isinstance(x, (int, float))]
        elif isinstance(v, (int, float)):
            flat.append(float(v))
    return float(np.mean(flat)) if flat else None


def fit(rows: list[dict[str, Any]], gpus_per_cell: int = 1, active_params_b: float = 0.0004,
        tool_fraction: float = 0.1) -> dict[str, Any]:
    """Fitted values, as a nested dict shaped like the config (``sim``, ``scheduler``, ``trajectory``)."""
    first = rows[0]
    cells = first["cells"] if isinstance(first["cells"], int) else len(first["cells"])
    sched = first["scheduler"] if isinstance(first["scheduler"], dict) else {"name": first["scheduler"]}
    batches = [_count(r["rollout/calls_per_execution"]) for r in rows]  # executions trained per step
    batch = sched.get("batch_size") or (int(np.median([b for b in batches if b])) if any(batches) else None)
    if not batch:
        raise CalibrationError("batch size unknown: give scheduler.batch_size or per-execution lists")
    weights = [float(b or batch) for b in batches]

    calls = pooled([spread(r["rollout/calls_per_execution"], f"{r['_where']} rollout/calls_per_execution")
                    for r in rows], weights)
    timed = [r for r in rows if r["rollout/execution_time_s"] != []]  # steps where executions finished
    if not timed:
        raise CalibrationError("rollout/execution_time_s is empty in every step: no execution time to fit")
    duration = pooled([spread(r["rollout/execution_time_s"], f"{r['_where']} rollout/execution_time_s")
                       for r in timed], [float(_count(r["rollout/execution_time_s"]) or batch) for r in timed])
    per_exec_tree = float(np.mean([r["tokens/tree"] / w for r, w in zip(rows, weights)]))
    per_exec_policy = float(np.mean([r["tokens/policy"] / w for r, w in zip(rows, weights)]))
    if per_exec_policy <= 0:
        raise CalibrationError("tokens/policy is 0 in every step: nothing to fit the decode rate on")
    decode_per_call = per_exec_policy / calls.mean
    prefill_per_call = max(0.0, per_exec_tree - per_exec_policy) / calls.mean

    # Execution time = model-call time (decode, at the run's concurrency) + everything else (tools, harness
    # start-up, scoring). Both are measured per execution when the run logs them; else the split is assumed.
    tool_rows, model_rows = _lists(rows, "rollout/tool_time_s"), _lists(rows, "rollout/model_time_s")
    if tool_rows:
        tool = pooled([spread(t, "rollout/tool_time_s") for t in tool_rows], [1.0] * len(tool_rows))
        tool_source = "measured (rollout/tool_time_s)"
    else:
        tool = Spread(tool_fraction * duration.mean, 0.0, 0.0)
        tool_source = f"assumed: --tool-fraction {tool_fraction} of the mean execution time"
    if model_rows:
        model = pooled([spread(m, "rollout/model_time_s") for m in model_rows], [1.0] * len(model_rows))
    else:  # all of the execution-time variance is put on the model time
        model_mean = max(1e-9, duration.mean - tool.mean)
        model = Spread(model_mean, 0.0, duration.cv2 * (duration.mean / model_mean) ** 2)
    decode_s_per_token = max(1e-9, model.mean / per_exec_policy)
    # Per-call spreads that reproduce each part's per-execution spread, net of the call-count spread.
    calls_cv2 = math.expm1(calls.sigma**2)
    decode_sigma = per_call_sigma(max(0.0, model.cv2 - calls_cv2), calls.mean)
    tool_sigma = per_call_sigma(max(0.0, tool.cv2 - calls_cv2), calls.mean) if tool_rows else 0.0
    trace = measured_trace(rows, decode_s_per_token, prefill_per_call)

    # Training: time = intercept + slope x tree tokens, on the cells that trained.
    tokens = np.asarray([r["tokens/tree"] for r in rows], dtype=float)
    times = np.asarray([r["train/time_s"] for r in rows], dtype=float)
    sync = _mean_of([r.get("train/weight_sync_s") for r in rows]) or 0.0
    if np.ptp(tokens) > 0.05 * tokens.mean() and len(rows) >= 3:
        slope, intercept = np.polyfit(tokens, times, 1)
        if slope <= 0:
            slope, intercept = times.sum() / tokens.sum(), 0.0
    else:
        slope, intercept = times.sum() / tokens.sum(), 0.0
    train_cells = _train_cells(rows, sched, cells)
    flops_per_token = 6 * active_params_b * 1e9
    achieved = float(flops_per_token / (slope * train_cells * gpus_per_cell) / 1e12)
    overhead = max(0.0, float(intercept) - sync)

    r2t = _mean_of([r.get("switch/rollout_to_train_s") for r in rows])
    t2r = _mean_of([r.get("switch/train_to_rollout_s") for r in rows])
    staleness = int(sched.get("max_staleness", 1))
    sessions = first.get("cells/capacity") or max(1, math.ceil(batch * (staleness + 1) / cells))
    scheduler = {"batch_size": batch}
    if sched.get("name") != "colocate":  # colocate runs ahead of nothing: its staleness says nothing
        scheduler["max_staleness"] = staleness
    if sched.get("rollout_cells"):  # async's split, as the run was configured
        scheduler["rollout_cells"] = int(sched["rollout_cells"])
    parking = parking_rates(rows)
    return {
        "sim": {
            "name": "calibrated", "steps": len(rows), "cells": cells, "gpus_per_cell": gpus_per_cell,
            "group_size": int(first.get("group_size") or 1),
            "model": {"total_params_b": active_params_b, "active_params_b": active_params_b, "weight_bytes": 0.0,
                      "kv_bytes_per_token": 0.0},
            "rollout": {"engines_per_cell": 1, "max_sessions": sessions, "step_overhead_s": decode_s_per_token,
                        "session_context_tokens": None},
            "workload": {"trace": None, "calls_mean": calls.mean, "calls_sigma": calls.sigma,
                         "max_calls": int(max(1, math.ceil(calls.mean * math.exp(4 * calls.sigma)))),
                         "prompt_tokens_mean": 0.0, "prompt_tokens_sigma": 0.0,
                         "prefill_tokens_mean": prefill_per_call, "prefill_tokens_sigma": 0.0,
                         "decode_tokens_mean": decode_per_call, "decode_tokens_sigma": decode_sigma,
                         "tool_s_mean": tool.mean / calls.mean, "tool_s_sigma": tool_sigma, "timeout_s": None},
            "train": {"achieved_tflops_per_gpu": achieved, "weight_sync_s": sync, "step_overhead_s": overhead},
            "switch": {"rollout_to_train_s": r2t if r2t is not None else 0.0,
                       "train_to_rollout_s": t2r if t2r is not None else 0.0},
            **({"parking": parking} if parking else {}),
        },
        "scheduler": scheduler,
        "trajectory": {"max_paths": None},
        "_trace": trace,
        "_notes": {"tool": tool_source, "train_cells": train_cells, "policy": sched.get("name"),
                   "measured_step_time_s": float(np.mean([r["step_time_s"] for r in rows])),
                   "measured_train_time_s": float(times.mean()), "switch_seen": r2t is not None},
    }


def parking_rates(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``sim.parking`` keys measured by a run whose router parked sessions (None if it logged no restore):
    each restore path's rate over the whole run, and the path that took the most restore seconds."""
    def total(key: str) -> float:
        return float(sum(r.get(key) or 0.0 for r in rows))

    transfer_s, recompute_s = total("parking/transfer_s"), total("parking/recompute_s")
    if transfer_s <= 0 and recompute_s <= 0:
        return None
    out: dict[str, Any] = {"enabled": True, "restore": "transfer" if transfer_s >= recompute_s else "recompute"}
    if transfer_s > 0 and total("parking/transfer_bytes") > 0:
        out["host_gb_s"] = total("parking/transfer_bytes") / transfer_s / 1e9
    if recompute_s > 0 and total("parking/recomputed_tokens") > 0:
        out["recompute_tokens_s"] = total("parking/recomputed_tokens") / recompute_s
    return out


def measured_trace(rows: list[dict[str, Any]], decode_s_per_token: float,
                   prefill_per_call: float) -> list[dict[str, Any]] | None:
    """The run's executions as a simulator trace, when every step logs them one by one (model time, other
    time, calls): each becomes its calls with its own model time as decode tokens at the fitted rate and its
    own tool time, spread evenly. Sampling these reproduces the measured durations, tail included, which
    per-call log-normals (light-tailed once summed over many calls) do not. None when not logged."""
    keys = ("rollout/model_time_s", "rollout/tool_time_s", "rollout/execution_calls")
    if not all(isinstance(r.get(k), list) for r in rows for k in keys):
        return None
    trace = []
    for r in rows:
        model, tool, calls = (r[k] for k in keys)
        if not len(model) == len(tool) == len(calls):
            raise CalibrationError(f"{r['_where']}: {', '.join(keys)} must have one entry per execution each")
        for seconds, other, count in zip(model, tool, calls, strict=True):
            count = max(1, int(count))
            call = {"prefill": round(prefill_per_call, 3), "decode": round(seconds / decode_s_per_token / count, 3),
                    "tool_s": round(other / count, 6)}
            trace.append({"calls": [call] * count})
    return trace or None


def write_trace(fitted: dict[str, Any], path: Path, name: str | None = None) -> dict[str, Any]:
    """Write the fitted trace to ``path``; the fit with ``sim.workload.trace`` naming it (``name``, or the
    path itself). Without a trace the fit is returned unchanged (log-normal workload)."""
    if not fitted.get("_trace"):
        return fitted
    path.write_text("".join(json.dumps(execution, separators=(",", ":")) + "\n" for execution in fitted["_trace"]))
    workload = {**fitted["sim"]["workload"], "trace": name or str(path)}
    return {**fitted, "sim": {**fitted["sim"], "workload": workload}}


def write_preset(fitted: dict[str, Any], out: Path, source: str, note: str = "") -> dict[str, Any]:
    """Write the preset to ``out`` and the run's trace beside it (``STEM_trace.jsonl``, named relative to
    the preset's folder); returns the fit as written."""
    trace = out.with_name(f"{out.stem}_trace.jsonl")
    fitted = write_trace(fitted, trace, trace.name)
    out.write_text(to_yaml(fitted, source, note))
    return fitted


def fitted_config(fitted: dict[str, Any], overrides: list[str] | tuple[str, ...] = ()) -> RootCfg:
    """The fitted preset over the base config, as ``+sim=calibrated`` composes it, then dotlist overrides."""
    from omegaconf import OmegaConf

    preset = {k: v for k, v in fitted.items() if not k.startswith("_")}
    merged = OmegaConf.merge(OmegaConf.structured(load_config()), preset, OmegaConf.from_dotlist(list(overrides)))
    return validate(merged)


def _train_cells(rows: list[dict[str, Any]], sched: dict[str, Any], cells: int) -> float:
    given = [r["train/cells"] for r in rows if isinstance(r.get("train/cells"), (int, float))]
    if given:
        return float(np.mean(given))
    if sched.get("name") == "async" and sched.get("rollout_cells"):
        return float(cells - sched["rollout_cells"])
    return float(cells)


SECTIONS = {"sim": "simulated cluster (fitted keys only; the rest from conf/sim_config.yaml)",
            "parking": "sessions waiting on tools gave back their slots (measured restores)",
            "model": "model size (FLOPs only)", "rollout": "rollout rate model (flat)", "workload": "executions",
            "train": "training cost", "switch": "role-switch costs", "scheduler": "the run's scheduler",
            "trajectory": "path cap"}

COMMENTS = {
    "name": "label in outputs", "steps": "steps in the measured run", "cells": "cells in the measured run",
    "group_size": "the run's GRPO group size (trainer.group_size)",
    "gpus_per_cell": "devices per cell (--gpus-per-cell)",
    "total_params_b": "model size in billions (--active-params-b; only FLOPs use it here)",
    "active_params_b": "active parameters in billions (--active-params-b)",
    "weight_bytes": "0: weight reads are folded into the fitted per-token decode time",
    "kv_bytes_per_token": "0: KV reads folded into the fitted decode time (flat rate model)",
    "engines_per_cell": "one engine per cell", "max_sessions": "the run's cells/capacity (the scheduler's C_e), else ceil(batch x (staleness + 1) / cells)",
    "step_overhead_s": None, "session_context_tokens": "derived from the workload",
    "trace": "log-normal workload", "calls_mean": "fitted: mean calls per execution",
    "calls_sigma": "fitted: log-space spread of calls", "max_calls": "mean x e^(4 sigma)",
    "prompt_tokens_mean": "folded into prefill_tokens_mean", "prompt_tokens_sigma": "folded into prefill",
    "prefill_tokens_mean": "fitted: (tokens/tree - tokens/policy) per call",
    "prefill_tokens_sigma": "not identifiable from step metrics",
    "decode_tokens_mean": "fitted: tokens/policy per call",
    "decode_tokens_sigma": "fitted: per-call spread giving the model time's per-execution spread",
    "tool_s_mean": None, "tool_s_sigma": "fitted: per-call spread giving the tool time's per-execution spread",
    "timeout_s": "no timeout modelled", "achieved_tflops_per_gpu": "fitted: slope of train/time_s on tokens/tree",
    "weight_sync_s": "measured train/weight_sync_s mean (0 when absent)",
    "rollout_to_train_s": "measured mean", "train_to_rollout_s": "measured mean",
    "batch_size": "from the run's scheduler", "max_staleness": "from the run's scheduler",
    "rollout_cells": "from the run's scheduler (async's fixed split)",
    "max_paths": "tree tokens are measured after the cap: no further ratio",
    "enabled": "the run's router parked sessions", "restore": "the restore path that took the most seconds",
    "host_gb_s": "measured: parking/transfer_bytes over parking/transfer_s",
    "recompute_tokens_s": "measured: parking/recomputed_tokens over parking/recompute_s",
}


def to_yaml(fitted: dict[str, Any], source: str, note: str = "") -> str:
    """The preset file: package _global_, every key commented (how it was fitted)."""
    notes = fitted["_notes"]
    comments = dict(COMMENTS)
    comments["step_overhead_s"] = "fitted: seconds per decoded token at the run's concurrency (flat roofline)"
    comments["tool_s_mean"] = f"tool seconds per call; {notes['tool']}"
    comments["step_overhead_s@train"] = "fitted: intercept of train/time_s minus weight sync"
    if fitted["sim"]["workload"]["trace"]:
        comments["trace"] = ("the run's executions, sampled with replacement (relative: to conf/sim/); the "
                             "log-normal keys below are the same fit, unused while the trace is set")
    lines = ["# @package _global_",
             f"# Calibrated preset: fitted by gyre/sim/calibrate.py from {source}",
             (f"# ({fitted['sim']['steps']} steps, policy {notes['policy']}, measured mean step "
              f"{notes['measured_step_time_s']:.3f} s, training on {notes['train_cells']:g} cells)."),
             "# Regenerate: python -m gyre.sim.calibrate RUN.jsonl --out conf/sim/calibrated.yaml"]
    lines += [f"# {line}" for line in note.splitlines() if line.strip()]

    def emit(node: dict[str, Any], indent: int, parent: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                lines.append(" " * indent + f"{key}:  # {SECTIONS.get(key, 'section')}")
                emit(value, indent + 2, key)
                continue
            text = json.dumps(value) if value is not None else "null"
            if isinstance(value, float):
                text = f"{value:.6g}"
            comment = comments.get(f"{key}@{parent}") or comments.get(key) or "fitted"
            lines.append(" " * indent + f"{key}: {text}  # {comment}")

    emit({k: v for k, v in fitted.items() if not k.startswith("_")}, 0, "")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", help="jsonl of the real run (one line per step)")
    parser.add_argument("--out", default=None,
                        help="write the preset here, and the run's executions beside it as STEM_trace.jsonl "
                             "when logged (default: print the preset, log-normal workload)")
    parser.add_argument("--gpus-per-cell", type=int, default=1)
    parser.add_argument("--active-params-b", type=float, default=0.0004, help="default: the built-in tiny model")
    parser.add_argument("--tool-fraction", type=float, default=0.1,
                        help="share of execution time spent in tools when rollout/tool_time_s is absent")
    parser.add_argument("--note", default="", help="extra header comment for the preset")
    args = parser.parse_args(argv)
    fitted = fit(read_metrics(args.metrics), args.gpus_per_cell, args.active_params_b, args.tool_fraction)
    if args.out:
        fitted = write_preset(fitted, Path(args.out), Path(args.metrics).name, args.note)
        trace = fitted["sim"]["workload"]["trace"]
        print(f"wrote {args.out}" + (f" and {Path(args.out).with_name(trace)}" if trace else ""))
        return
    print(to_yaml(fitted, Path(args.metrics).name, args.note), end="")  # no file: no trace, log-normal workload


if __name__ == "__main__":
    main()
