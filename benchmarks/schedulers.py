"""Colocate vs async vs elastic on the same workload and the same cells, side by side in one run.

    python benchmarks/schedulers.py --out schedulers.json

Each policy runs the real main job (``python -m gyre.main``: Ray cells, proxy, reference harness, the
tiny model, the built-in DeepSWE-format tasks) in its own process with identical settings. Execution time
is made heavy-tailed by a simulated tool time before every agent turn drawn from a log-normal, as long
agent runs are. Reported per policy: time per step, cell idle fraction, executions per hour, role-switch
times, engine seconds per model call, what parking did (``parked_slot_s``, ``parks``, ``restores``,
``recomputed_tokens``, ``slot_share``: every policy parks sessions waiting on tools); and the speedups of elastic over each baseline, per step and on
equal work.

The cells' engines share this machine's cores (4 cells on 2 cores by default), so a policy that keeps
more engines decoding at once makes every call slower (``engine_call_s``), which independent devices
would not: an execution's wall seconds, and so ``work_s_per_hour``, then grow with the contention, while
``policy_tokens_per_hour`` does not.

Equal work: async and elastic train the executions that finish first, colocate the whole sample, so a step
of one policy is not the same work as a step of another. ``work_s_per_hour`` is the wall seconds of the
executions each policy trained per hour of steady-state run (the measured stand-in for execution-seconds
of work), ``policy_tokens_per_hour`` the policy tokens it trained; ``length_bias`` is the mean wall time of
its trained executions over that of every execution that finished; ``vs_ideal`` is an approximate bound:
the trained executions' seconds over a cell's capacity plus the training cell-seconds, spread over every
cell, against the wall time (approximate because an execution's seconds depend on how loaded its cell was).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

POLICIES = ("colocate", "async", "elastic")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4, help="training steps per policy")
    parser.add_argument("--cells", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8, help="executions per step")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=4, help="agent turns per execution")
    parser.add_argument("--delay-mu", type=float, default=0.0, help="log-normal mu of tool seconds per turn")
    parser.add_argument("--delay-sigma", type=float, default=1.2, help="log-normal sigma (the tail)")
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--stale-policy", default="keep", choices=("keep", "drop"))
    parser.add_argument("--stream-from", type=float, default=1.0,
                        help="scheduler.stream_from: async and elastic start a step on this share of its batch")
    parser.add_argument("--rollout-cells", type=int, default=3,
                        help="async: fixed rollout cells (3 of 4: rollout is ~80%% of the work here, the split "
                             "gyre/sim picks by work ratio, i.e. async at its best fixed split)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--keep", type=str, default=None, help="keep each run's folder under this path")
    parser.add_argument("--out", type=str, default=None, help="write a flat JSON object here")
    return parser.parse_args()


def steady_step_times(steps: list[dict]) -> list[float]:
    """Step times after the first, which also pays for start-up (Ray, engines) and an empty pipeline."""
    return [r["step_time_s"] for r in (steps[1:] or steps)]


def equal_work(steps: list[dict], cells: int) -> dict[str, float]:
    """Trained work per hour of the steady-state steps, the length bias, and the approximate ideal bound."""
    steady = steps[1:] or steps
    hours = sum(r["step_time_s"] for r in steady) / 3600.0
    trained_s = [t for r in steady for t in r.get("train/execution_time_s", []) if math.isfinite(t)]
    finished_s = [t for r in steps for t in r.get("rollout/execution_time_s", [])]
    trained_all = [t for r in steps for t in r.get("train/execution_time_s", []) if math.isfinite(t)]
    capacity = max(1, int(steady[-1].get("cells/capacity", 1)))
    train_cell_s = sum(r.get("train/time_s", 0.0) * max(1, r.get("train/cells", 1)) for r in steady)
    ideal_s = (sum(trained_s) / capacity + train_cell_s) / cells
    nan = float("nan")
    return {
        "work_s_per_hour": sum(trained_s) / hours if hours else nan,
        "policy_tokens_per_hour": sum(r.get("tokens/policy", 0.0) for r in steady) / hours if hours else nan,
        "length_bias": (sum(trained_all) / len(trained_all)) / (sum(finished_s) / len(finished_s))
        if trained_all and finished_s else nan,
        "vs_ideal": ideal_s / (hours * 3600.0) if hours else nan,
    }


def run_policy(policy: str, args: argparse.Namespace, root: Path) -> dict[str, float]:
    run_dir = root / policy
    overrides = [
        "+recipe=deepswe", f"run_dir={run_dir}", f"scheduler={policy}", f"trainer.total_steps={args.steps}",
        f"cluster.cells={args.cells}", f"scheduler.batch_size={args.batch_size}",
        f"trainer.group_size={args.group_size}", f"harness.max_turns={args.max_turns}",
        f"harness.reference.tool_delay_mu={args.delay_mu}", f"harness.reference.tool_delay_sigma={args.delay_sigma}",
        f"scheduler.max_staleness={args.max_staleness}", f"scheduler.stale_policy={args.stale_policy}",
        f"scheduler.stream_from={args.stream_from}",
        f"scheduler.rollout_cells={args.rollout_cells}", "harness.progress=false", "tracking.backends=[jsonl]",
        "trainer.save_every=0",
    ]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True, check=False,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{policy} run failed:\n{done.stderr[-4000:]}")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "step_time_s" in r]
    steady = steady_step_times(steps)
    finished = sum(r.get("executions/finished_since_last_step", 0) for r in steps)
    span = steps[-1]["time"] - (steps[0]["time"] - steps[0]["step_time_s"])
    last = steps[-1]
    return {
        **equal_work(steps, args.cells),
        "step_time": sum(steady) / len(steady),
        "wall_s": wall,
        "idle_fraction": last.get("idle_fraction", float("nan")),
        "executions_per_hour": 3600.0 * finished / span if span > 0 else float("nan"),
        "rollout_to_train_s": last.get("switch/rollout_to_train_s", float("nan")),
        "train_to_rollout_s": last.get("switch/train_to_rollout_s", float("nan")),
        "switches": last.get("switch/count", 0),
        "staleness_mean": sum(r.get("staleness/mean", 0.0) for r in steps) / len(steps),
        "engine_call_s": engine_call_s(run_dir, after=steps[0]["time"] if len(steps) > 1 else 0.0),
        **parking_totals(steps),
    }


def parking_totals(steps: list[dict]) -> dict[str, float]:
    """What parking did over the run (every policy parks alike): seconds sessions spent parked (engine slots
    given back while they waited on tools), parks, restores and the tokens restores recomputed; and the
    slot share the scheduler last saw."""
    def total(key: str) -> float:
        return float(sum(r.get(key, 0.0) for r in steps))

    return {"parked_slot_s": total("parking/parked_slot_s"), "parks": total("parking/parks"),
            "restores": total("parking/restores"), "recomputed_tokens": total("parking/recomputed_tokens"),
            "slot_share": float(steps[-1].get("parking/slot_share", 1.0))}


def engine_call_s(run_dir: Path, after: float) -> float:
    """Mean engine seconds per model call completed after ``after`` (the first step's end, as for the
    step times), from the records. The engines of every cell share this machine's cores, so this shows
    how much a policy's concurrency slows each call down: a simulator fitted on one policy's run assumes
    it does not."""
    from gyre.proxy.record_format import read_record_file

    seconds = [record.timings["total_s"] for path in sorted((run_dir / "records").glob("*.jsonl"))
               for record in read_record_file(path, errors=[])
               if "total_s" in record.timings and record.timings.get("completed_at", 0.0) > after]
    return sum(seconds) / len(seconds) if seconds else float("nan")


def main() -> dict[str, float]:
    args = parse_args()
    console = Console()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gyre-schedulers-"))
    results = {}
    for policy in args.policies:
        console.print(f"[bold]running {policy}[/bold] ({args.steps} steps, {args.cells} cells)")
        results[policy] = run_policy(policy, args, root)
    table = Table(title="schedulers on the same workload (tiny model, CPU)")
    table.add_column("metric")
    for policy in args.policies:
        table.add_column(policy, justify="right")
    for key in next(iter(results.values())):
        table.add_row(key, *[f"{results[p][key]:.4g}" for p in args.policies])
    console.print(table)
    flat: dict[str, float] = {}
    for policy, values in results.items():
        for key, value in values.items():
            flat[f"{key}_{policy}"] = value
    if "elastic" in results:
        elastic = results["elastic"]
        for baseline in ("colocate", "async"):
            if baseline in results:
                other = results[baseline]
                flat[f"speedup_vs_{baseline}"] = other["step_time"] / elastic["step_time"]
                flat[f"work_speedup_vs_{baseline}"] = elastic["work_s_per_hour"] / other["work_s_per_hour"]
                flat[f"token_speedup_vs_{baseline}"] = elastic["policy_tokens_per_hour"] / other["policy_tokens_per_hour"]
                console.print(f"elastic vs {baseline}: {flat[f'speedup_vs_{baseline}']:.3f}x per step, "
                              f"{flat[f'work_speedup_vs_{baseline}']:.3f}x trained execution-seconds per hour, "
                              f"{flat[f'token_speedup_vs_{baseline}']:.3f}x trained policy tokens per hour")
    flat.update({"steps": args.steps, "cells": args.cells, "batch_size": args.batch_size, "stale_policy": args.stale_policy, "stream_from": args.stream_from,
                 "delay_mu": args.delay_mu, "delay_sigma": args.delay_sigma})
    if args.out:
        Path(args.out).write_text(json.dumps(flat, indent=2))
    return flat


if __name__ == "__main__":
    main()
