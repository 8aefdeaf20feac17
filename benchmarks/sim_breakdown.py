"""Where each policy's cell-seconds go in a grid scenario, split into the wait for a batch and the step.

    python benchmarks/sim_breakdown.py --only cells_128 --out breakdown.json     # async at its best split (swept)
    python benchmarks/sim_breakdown.py --only cells_128 --async-split 68 --parking on --free-training

For each scenario of ``benchmarks/sim_grid.py`` (same configs, same seeds) and each parking mode, colocate,
async and elastic run once and the steps after the first (the first also fills the pipeline) are split by
phase (``gyre.sim.ledger.PHASES``): ``wait``, no training step running, and ``step``, one running (its
compute and its optimizer/weight-sync tail). Per policy: seconds per step in each phase, the cells training
on average during the step phase, and each ledger category's share of cells x those seconds (rollout busy
and idle throughput, training compute, training overhead and idle, switching).

``--free-training`` adds elastic with the training compute made free (``sim.train.achieved_tflops_per_gpu``
raised a million-fold; switch times, weight sync and the step tail unchanged): a ceiling on what any
training-side change (more cells spent on training during a step, say) could give elastic, reported as its
trained policy tokens per hour over async's at the best split (``S.elastic_free_training_vs_async_best``; the
work model depends on the training rate, tokens per hour do not).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table
from sim_grid import BASE, PARKING, SCENARIOS, Scenario

from gyre.sim.compare import best_async, run_policy
from gyre.sim.config import load_config
from gyre.sim.ledger import CATEGORIES, TRAINING
from gyre.sim.result import SimResult
from gyre.sim.world import World

FREE_TRAINING = 1e6  # training FLOP/s multiplier of the ceiling run


def policy_row(result: SimResult) -> dict[str, Any]:
    """The steady steps' split of one run, flat."""
    phases = result.steady_phases()
    row: dict[str, Any] = {"step_s": phases["period_s"], "wait_s": phases["wait_phase_s"],
                           "step_phase_s": phases["step_phase_s"], "cells_training_in_step": phases["cells_training_in_step"],
                           "tokens_per_h": result.policy_tokens_per_h, "vs_ideal": result.vs_ideal,
                           "rollout_cells": result.rollout_cells}
    for phase in ("wait", "step"):
        for category in CATEGORIES:
            row[f"{phase}.{category}"] = phases[phase][category]
    return row


def free_training(scenario: Scenario, mode: str, per_gpu: float) -> SimResult:
    """Elastic on the scenario's config with its training FLOP rate raised ``FREE_TRAINING``-fold."""
    overrides = [*(BASE[1] if scenario.on_base else []), *scenario.overrides, "sim.seed=0", *PARKING[mode],
                 f"sim.train.achieved_tflops_per_gpu={per_gpu * FREE_TRAINING}"]
    root = load_config(scenario.preset, overrides)
    return run_policy(World(root), root, "elastic")


def run_scenario(name: str, mode: str, split: int | None, ceiling: bool) -> dict[str, Any]:
    scenario = next(s for s in SCENARIOS if s.name == name)
    root = scenario.config(0, PARKING[mode])
    world = World(root)
    results = {"colocate": run_policy(world, root, "colocate"), "elastic": run_policy(world, root, "elastic")}
    results["async"] = run_policy(world, root, "async", split) if split else best_async(world, root)[0]
    rows = {policy: policy_row(result) for policy, result in results.items()}
    out: dict[str, Any] = {"rows": rows, "cells": root.sim.cells,
                           "elastic_vs_async_tokens": rows["elastic"]["tokens_per_h"] / rows["async"]["tokens_per_h"]}
    if ceiling:
        free = free_training(scenario, mode, world.train.cell_flops / root.sim.gpus_per_cell / 1e12)
        out["elastic_free_training_tokens_per_h"] = free.policy_tokens_per_h
        out["elastic_free_training_step_s"] = free.steady_step_s
        out["elastic_free_training_vs_async_best"] = free.policy_tokens_per_h / rows["async"]["tokens_per_h"]
    return out


def table(name: str, mode: str, out: dict[str, Any]) -> Table:
    t = Table(title=f"{name}, parking {mode}: steady steps, shares of cells x time per phase")
    for header in ("policy", "step s", "wait s", "step-phase s", "cells training in step",
                   "wait: busy/idle/train/switch", "step: busy/idle/compute/overhead+idle/switch", "tokens/h"):
        t.add_column(header, justify="left" if header == "policy" else "right")
    for policy, r in out["rows"].items():
        label = policy if policy != "async" else f"async ({r['rollout_cells']})"
        wait_train = sum(r[f"wait.{c}"] for c in TRAINING)
        wait = (r["wait.rollout_busy"], r["wait.rollout_idle"], wait_train, r["wait.switching"])
        t.add_row(label, f"{r['step_s']:.0f}", f"{r['wait_s']:.0f}", f"{r['step_phase_s']:.0f}",
                  f"{r['cells_training_in_step']:.1f}",
                  "/".join(f"{share:.3f}" for share in wait),
                  f"{r['step.rollout_busy']:.3f}/{r['step.rollout_idle']:.3f}/{r['step.train_compute']:.3f}/"
                  f"{r['step.train_overhead'] + r['step.train_idle']:.3f}/{r['step.switching']:.3f}",
                  f"{r['tokens_per_h']:.3g}")
    return t


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["cells_128"], help="grid scenarios (benchmarks/sim_grid.py)")
    parser.add_argument("--parking", choices=("both", "on", "off"), default="both")
    parser.add_argument("--async-split", type=int, default=None,
                        help="async's rollout cells (default: its best split, swept as the grid does)")
    parser.add_argument("--free-training", action="store_true",
                        help="add elastic with free training compute: the ceiling of any training-side change")
    parser.add_argument("--out", default=None, help="write the flat JSON object here")
    args = parser.parse_args()
    known = {s.name for s in SCENARIOS}
    unknown = [name for name in args.only if name not in known]
    if unknown:
        parser.error(f"unknown scenarios {' '.join(unknown)} (python benchmarks/sim_grid.py --list)")
    console = Console(width=170)
    flat: dict[str, Any] = {}
    for name in args.only:
        for mode in (["on", "off"] if args.parking == "both" else [args.parking]):
            out = run_scenario(name, mode, args.async_split, args.free_training)
            console.print(table(name, mode, out))
            prefix = f"{name}.parking_{mode}"
            for policy, row in out.pop("rows").items():
                flat.update({f"{prefix}.{policy}.{key}": value for key, value in row.items()})
            flat.update({f"{prefix}.{key}": value for key, value in out.items()})
            if "elastic_free_training_vs_async_best" in out:
                console.print(f"elastic with free training compute: {out['elastic_free_training_vs_async_best']:.3f}x "
                              f"async's tokens per hour (elastic as is: {out['elastic_vs_async_tokens']:.3f}x)")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(flat, handle, indent=2)
    return flat


if __name__ == "__main__":
    main()
