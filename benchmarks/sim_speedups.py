"""Elastic vs colocate and vs async at equal GPUs, each against the ideal bound, on every sim preset.

    python benchmarks/sim_speedups.py --out sim_speedups.json            # all presets, one table
    python benchmarks/sim_speedups.py --presets deepswe_122b --steps 10  # quicker
    python benchmarks/sim_speedups.py --scale                            # 4096 GPUs, 10,000 executions, timed

Each preset's three policies run on the same simulated cluster and the same workload stream, side by side
in one run (gyre/sim). ``vs_colocate`` / ``vs_async`` are elastic's speedups on equal work: its trained work
per hour over the other policy's (``per_step_vs_*``: the other's wall time over elastic's for the same
steps); ``elastic_vs_ideal`` is elastic's trained work per hour over the cluster's (the ideal bound of the
work it trained: all of it spread over every cell, no idling, no switching, no waste; <= 1). Async uses the
split sized by the work ratio; ``vs_async_half`` shows the common half/half split for context
(``benchmarks/sim_grid.py`` sweeps async's split for its best).

The gap to ideal is decomposed exactly: cells x wall - trained work = unused rollout throughput + rollout
work on executions dropped as too stale + rollout work still in flight or ready when the last step ends
(an end-of-run effect that shrinks with more steps) + training-side overhead (weight pulls, optimizer and
weight-sync tail) + training cells idle + switching + below peak (rollout cell-time of the trained
executions beyond their work at a cell's peak throughput: sessions on lightly loaded cells, migrations).

``--out FILE`` writes a flat JSON object: ``P.vs_colocate``, ``P.vs_async``, ``P.elastic_vs_ideal`` (and a few
more) for each preset P. The full per-policy results go to ``--full FILE``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from gyre.sim.config import load_config
from gyre.sim.engine import Simulator
from gyre.sim.result import SimResult
from gyre.sim.run import scheduler_config, simulate
from gyre.sim.world import World

PRESETS = ("nl2repo_122b", "deepswe_122b", "terminalbench_122b", "nl2repo_2t")
PUBLISHED = {  # (vs colocate, vs async) ranges from REFERENCE.md
    "nl2repo_122b": ("1.36-1.47x", "1.42-1.53x"), "deepswe_122b": ("1.610-1.824x", "1.569-1.572x"),
    "terminalbench_122b": ("1.809-1.849x", "1.383-1.430x"), "nl2repo_2t": ("1.21x (91.47/75.42 h)", "1.78x (134.55/75.42 h)"),
}
GAP_TERMS = ("rollout_idle", "rollout_dropped", "rollout_at_end", "train_overhead", "train_idle", "switching",
             "below_peak")


def run_preset(preset: str, overrides: list[str]) -> dict[str, SimResult]:
    root = load_config(preset, overrides)
    world = World(root)
    names = ("colocate", "async", "elastic")
    results: dict[str, SimResult] = dict(zip(names, simulate(root, list(names), world), strict=True))
    half = scheduler_config(root, "async", world)
    half.rollout_cells = max(1, root.sim.cells // 2)
    results["async_half"] = Simulator(world, half).run()
    return results


def gap(result: SimResult) -> dict[str, float]:
    """Where elastic's (or any policy's) time beyond the ideal went, as fractions of cells x wall."""
    total = result.cells * result.wall_time_s
    c = result.cell_s
    ideal_work = result.ideal_time_s * result.cells
    wasted = min(result.wasted_rollout_cell_s, c["rollout_busy"])
    terms = {
        "rollout_idle": c["rollout_idle"], "rollout_dropped": result.dropped_rollout_cell_s,
        "rollout_at_end": wasted - result.dropped_rollout_cell_s, "train_overhead": c["train_overhead"],
        "train_idle": c["train_idle"], "switching": c["switching"] + c["other"],
        "below_peak": (c["rollout_busy"] - wasted) + c["train_compute"] - ideal_work,
    }
    out = {k: v / total for k, v in terms.items()}
    out["ideal_share"] = ideal_work / total
    return out


def summarise(preset: str, results: dict[str, SimResult]) -> dict[str, Any]:
    e, c, a, h = (results[k] for k in ("elastic", "colocate", "async", "async_half"))
    return {
        "preset": preset, "gpus": e.gpus, "steps": e.steps, "batch": e.batch_size,
        "wall_h": {k: r.wall_time_s / 3600 for k, r in results.items()}, "ideal_h": e.ideal_time_s / 3600,
        "vs_colocate": e.work_rate / c.work_rate, "vs_async": e.work_rate / a.work_rate,
        "vs_async_half": e.work_rate / h.work_rate, "async_rollout_cells": a.rollout_cells,
        "per_step_vs_colocate": c.wall_time_s / e.wall_time_s, "per_step_vs_async": a.wall_time_s / e.wall_time_s,
        "length_bias": {k: r.length_bias for k, r in results.items()},
        "elastic_vs_ideal": e.vs_ideal, "colocate_vs_ideal": c.vs_ideal, "async_vs_ideal": a.vs_ideal,
        "elastic_gap": gap(e), "colocate_gap": gap(c), "async_gap": gap(a),
        "dropped_share": {k: r.dropped / max(1, r.dispatched) for k, r in results.items()},
        "staleness_mean": {k: r.staleness_mean for k, r in results.items()},
        "host_s": sum(r.sim_seconds for r in results.values()),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [("| preset | GPUs | elastic h | colocate h | async h (split) | ideal h | vs colocate | vs async | "
              "vs async 1/2 | elastic of ideal | published vs colocate / vs async |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w = r["wall_h"]
        pub = PUBLISHED.get(r["preset"], ("", ""))
        lines.append(f"| {r['preset']} | {r['gpus']} | {w['elastic']:.2f} | {w['colocate']:.2f} | "
                     f"{w['async']:.2f} ({r['async_rollout_cells']} roll) | {r['ideal_h']:.2f} | "
                     f"{r['vs_colocate']:.2f}x | {r['vs_async']:.2f}x | {r['vs_async_half']:.2f}x | "
                     f"{r['elastic_vs_ideal']:.2f} | {pub[0]} / {pub[1]} |")
    lines += ["", "Gap to ideal (elastic), share of cells x wall:", "",
              ("| preset | ideal | rollout idle | rollout dropped (stale) | rollout unused at end | train overhead | "
               "train idle | switching | below peak | dropped / dispatched |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = r["elastic_gap"]
        lines.append(f"| {r['preset']} | {g['ideal_share']:.1%} | " + " | ".join(f"{g[t]:.1%}" for t in GAP_TERMS)
                     + f" | {r['dropped_share']['elastic']:.1%} |")
    return "\n".join(lines)


def rich_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Simulated speedups at equal GPUs, on equal work (gyre/sim)")
    for header in ("preset", "GPUs", "elastic h", "colocate h", "async h", "ideal h", "vs colocate", "vs async",
                   "vs async 1/2", "elastic of ideal"):
        table.add_column(header, justify="left" if header == "preset" else "right")
    for r in rows:
        w = r["wall_h"]
        table.add_row(r["preset"], str(r["gpus"]), f"{w['elastic']:.2f}", f"{w['colocate']:.2f}",
                      f"{w['async']:.2f}", f"{r['ideal_h']:.2f}", f"{r['vs_colocate']:.2f}x",
                      f"{r['vs_async']:.2f}x", f"{r['vs_async_half']:.2f}x", f"{r['elastic_vs_ideal']:.2f}")
    return table


def scale_check(console: Console) -> dict[str, Any]:
    """4096 GPUs (512 cells x 8) and 10,000 trained executions (10 steps x 1000), each policy timed."""
    overrides = ["sim.cells=512", "scheduler.batch_size=1000", "sim.steps=10"]
    root = load_config("deepswe_122b", overrides)
    started = time.perf_counter()
    world = World(root)
    out: dict[str, Any] = {"gpus": root.sim.cells * root.sim.gpus_per_cell, "overrides": overrides,
                           "world_s": time.perf_counter() - started}
    for name in ("colocate", "async", "elastic"):
        started = time.perf_counter()
        [result] = simulate(root, [name], world)
        out[name] = {"host_s": time.perf_counter() - started, "dispatched": result.dispatched,
                     "trained": result.trained, "events": result.events, "decide_calls": result.decide_calls}
        console.print(f"scale {name}: {out[name]['host_s']:.1f} s for {result.dispatched} executions "
                      f"({result.events} events, {result.decide_calls} decide calls) on {out['gpus']} GPUs")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--steps", type=int, default=None, help="override sim.steps (default: each preset's)")
    parser.add_argument("--override", nargs="*", default=[], help="extra Hydra-style overrides for every preset")
    parser.add_argument("--out", default=None, help="flat JSON: P.vs_colocate, P.vs_async, P.elastic_vs_ideal, ...")
    parser.add_argument("--full", default=None, help="full JSON of every preset's summary")
    parser.add_argument("--markdown", default=None, help="write the markdown tables here too")
    parser.add_argument("--scale", action="store_true", help="also time 4096 GPUs / 10,000 executions")
    args = parser.parse_args()
    console = Console(width=170)
    overrides = list(args.override) + ([f"sim.steps={args.steps}"] if args.steps else [])
    rows = []
    for preset in args.presets:
        rows.append(summarise(preset, run_preset(preset, overrides)))
        console.print(f"{preset}: done in {rows[-1]['host_s']:.1f} s host time")
    console.print(rich_table(rows))
    text = markdown(rows)
    print(text)
    flat: dict[str, float] = {}
    for r in rows:
        for key in ("vs_colocate", "vs_async", "elastic_vs_ideal", "vs_async_half", "colocate_vs_ideal",
                    "async_vs_ideal", "per_step_vs_colocate", "per_step_vs_async"):
            flat[f"{r['preset']}.{key}"] = r[key]
    full: dict[str, Any] = {"presets": rows, "overrides": overrides}
    if args.scale:
        full["scale"] = scale_check(console)
        flat["scale.max_policy_host_s"] = max(full["scale"][k]["host_s"] for k in ("colocate", "async", "elastic"))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(flat, handle, indent=2)
    if args.full:
        with open(args.full, "w") as handle:
            json.dump(full, handle, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
