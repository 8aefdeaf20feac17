"""Elastic against colocate and async at its best split, on equal work, over a grid of simulated scenarios.

    python benchmarks/sim_grid.py --out grid.json             # the whole grid (~17 minutes on one CPU core)
    python benchmarks/sim_grid.py --only base cells_128 --out some.json
    python benchmarks/sim_grid.py --seeds 3 --out grid3.json  # medians over three workload seeds (3x longer)
    python benchmarks/sim_grid.py --stream-from 0.1 --out grid_streamed.json  # steps stream in their batch's tail
    python benchmarks/sim_grid.py --only cells_128 --set scheduler.max_staleness=2 --out s2.json  # any config key
    python benchmarks/sim_grid.py --parking off --out grid_off.json  # only the grid without parking (half the time)

Every scenario changes one thing of a base run (a DeepSWE-shaped 122B MoE run, conf/sim/deepswe_122b.yaml:
32 cells of 8 GPUs, 1024 executions per step, max_staleness 1, the default stale_policy, the paper's switch
times): lengths (heavy-tailed, bimodal: on 8 cells for 80 steps, as a run must outlast its longest
executions), tool-dominated executions, training cost from 0.05x to 3x a
rollout, 2 to 1024 cells (the batch growing with the cluster, and the batch fixed while the cluster grows),
staleness 0 to 4, switch costs 0 to 60 s, GRPO groups, stale_policy=drop; plus the paper-shaped presets.
In each, colocate, async at every split ``gyre.sim.compare`` sweeps (its best kept) and elastic run on the
same workload stream (``gyre/sim/compare.py``). Plus tool gaps replayed from recorded executions
(``conf/sim/tool_gaps_cpu.jsonl``) and parked KV restored by recompute instead of a host transfer.

Parking (``sim.parking``): by default the grid runs twice, every policy with parking (sessions waiting on
tools give back their engine slots: the figures and ``targets.*``) and every policy without it (the same
keys under ``S.without_parking.*`` and ``targets_without_parking.*``); ``S.parking_gain_<policy>`` is what
parking gives each policy, its trained policy tokens per hour with parking over without (async: each at its
best split). ``--parking on`` or ``off`` runs one grid only (its figures under the plain keys).

Speedups are on equal work: trained work per hour (rollout and training cell-seconds of the executions each
policy trained), elastic's over the baseline's. ``vs_ideal`` is elastic's trained work per hour over the
cluster's (the ideal bound of the work it trained: <= 1). ``length_bias`` is the mean work of elastic's
trained executions over that of all it dispatched. ``--out FILE`` writes a flat JSON object with, for each
scenario S, ``S.vs_colocate``, ``S.vs_async_best``, ``S.vs_ideal``, ``S.length_bias`` and a few more
(``S.vs_async_planned``: against async at the split planned from the work ratio, without a sweep;
per-step speedups, async's best split, every policy's ``vs_ideal``), plus ``targets.*`` (the checks below) and
``overrides`` (what ``--set`` and ``--stream-from`` applied to every scenario) and ``parking``.
``S.elastic_rollout_idle`` is elastic's unused rollout throughput and ``S.elastic_rollout_idle_capped`` the part
of it while the look-ahead (``max_staleness`` batches beyond the one being generated) allowed no dispatch at
all: throughput that no policy under the same staleness bound could have used for rollout.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hydra.errors import ConfigCompositionException
from rich.console import Console
from rich.table import Table

from gyre.sim.compare import compare
from gyre.sim.config import ConfigError, RootCfg, load_config
from gyre.sim.world import World

BASE = ("deepswe_122b", ["sim.cells=32", "scheduler.batch_size=1024", "sim.steps=10"])
PAPER_SWITCH = (8.52, 3.46)
LONG_RUN = ["sim.cells=8", "scheduler.batch_size=256", "sim.steps=80"]


@dataclass
class Scenario:
    name: str
    overrides: list[str] = field(default_factory=list)
    preset: str = BASE[0]
    train_ratio: float | None = None  # training cost per execution as a multiple of its rollout cost
    on_base: bool = True  # apply the base overrides first

    def config(self, seed: int = 0, extra: list[str] | None = None) -> RootCfg:
        overrides = (BASE[1] if self.on_base else []) + self.overrides + [f"sim.seed={seed}", *(extra or [])]
        root = load_config(self.preset, overrides)
        if self.train_ratio is not None:
            root = with_train_ratio(root, overrides, self.preset, self.train_ratio)
        return root


def with_train_ratio(root: RootCfg, overrides: list[str], preset: str, ratio: float) -> RootCfg:
    """The config whose training FLOP rate makes a step's training work ``ratio`` x its rollout work."""
    ideal = World(root).ideal
    now = ideal.train_cell_s / ideal.rollout_cell_s
    per_gpu = World(root).train.cell_flops / root.sim.gpus_per_cell / 1e12
    return load_config(preset, [*overrides, f"sim.train.achieved_tflops_per_gpu={per_gpu * now / ratio}"])


def weak(cells: int, steps: int) -> Scenario:
    """The cluster and the batch grow together: 32 executions per cell, half a cell's sessions."""
    return Scenario(f"cells_{cells}", [f"sim.cells={cells}", f"scheduler.batch_size={32 * cells}", f"sim.steps={steps}",
                                       *(["sim.decide_interval_s=1"] if cells >= 128 else [])])


def strong(cells: int, steps: int) -> Scenario:
    """The batch stays at 1024 while the cluster grows: a step can only get shorter."""
    return Scenario(f"fixed_batch_{cells}", [f"sim.cells={cells}", f"sim.steps={steps}", "sim.decide_interval_s=1"])


SCENARIOS = [
    Scenario("base"),
    # Long tails need long runs: a run shorter than its longest executions trains only the ones that ended,
    # whatever the policy. These run on 8 cells (the base per cell) for many more steps.
    Scenario("heavy_tail", [*LONG_RUN, "sim.workload.calls_sigma=1.2", "sim.workload.tool_s_sigma=1.6",
                            "sim.workload.decode_tokens_sigma=1.0", "sim.workload.max_calls=400"]),
    Scenario("bimodal", [*LONG_RUN, "sim.workload.calls_sigma=0.3", "sim.workload.long_share=0.1",
                         "sim.workload.long_calls_factor=40", "sim.workload.max_calls=4000",
                         "sim.workload.timeout_s=null"]),
    Scenario("tool_dominated", ["sim.workload.tool_s_mean=60", "sim.workload.decode_tokens_mean=100",
                                "sim.workload.calls_mean=20"]),
    Scenario("train_0.05x", train_ratio=0.05),
    Scenario("train_1x", train_ratio=1.0),
    Scenario("train_3x", train_ratio=3.0),
    weak(2, 10), weak(8, 10), weak(128, 8), weak(512, 4), weak(1024, 3),
    strong(128, 10), strong(512, 10), strong(1024, 10),
    Scenario("staleness_0", ["scheduler.max_staleness=0"]),
    Scenario("staleness_2", ["scheduler.max_staleness=2"]),
    Scenario("staleness_4", ["scheduler.max_staleness=4"]),
    Scenario("switch_0s", ["sim.switch.rollout_to_train_s=0", "sim.switch.train_to_rollout_s=0"]),
    Scenario("switch_60s", ["sim.switch.rollout_to_train_s=60", "sim.switch.train_to_rollout_s=60"]),
    Scenario("groups_8", ["sim.group_size=8"]),
    Scenario("stale_drop", ["scheduler.stale_policy=drop"]),
    # Tool gaps as recorded by the proxy on a real run (gyre/sim/gaps.py), scaled to the base's mean gap.
    Scenario("tool_gaps_recorded", ["sim.workload.tool_gaps=tool_gaps_cpu.jsonl"]),
    Scenario("restore_recompute", ["sim.parking.restore=recompute"]),  # parked KV dropped, its prefix recomputed
    Scenario("preset_deepswe_122b", ["sim.steps=10"], "deepswe_122b", on_base=False),
    Scenario("preset_nl2repo_122b", ["sim.steps=8"], "nl2repo_122b", on_base=False),
    Scenario("preset_terminalbench_122b", ["sim.steps=10"], "terminalbench_122b", on_base=False),
    Scenario("preset_nl2repo_2t", ["sim.steps=8"], "nl2repo_2t", on_base=False),
]


def paper_switch(root: RootCfg) -> bool:
    return (root.sim.switch.rollout_to_train_s, root.sim.switch.train_to_rollout_s) == PAPER_SWITCH


SPREAD = ("vs_colocate", "vs_async_best", "vs_ideal", "length_bias")  # reported with min and max over seeds


def run(scenario: Scenario, seeds: int = 1, extra: list[str] | None = None) -> dict[str, Any]:
    """The scenario's figures at workload seeds 0..seeds-1: the median of each, with min and max of ``SPREAD``."""
    started = time.perf_counter()
    runs = []
    for seed in range(seeds):
        root = scenario.config(seed, extra)
        runs.append(compare(root).figures())
    figures: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            figures[key] = float(np.median([r[key] for r in runs]))
        else:
            figures[key] = value
    for key in SPREAD:
        figures[f"{key}_min"] = min(r[key] for r in runs)
        figures[f"{key}_max"] = max(r[key] for r in runs)
    figures["max_vs_ideal"] = max(r["max_vs_ideal"] for r in runs)
    figures.update(cells=root.sim.cells, batch_size=root.scheduler.batch_size, max_staleness=root.scheduler.max_staleness,
                   stale_policy=root.scheduler.stale_policy, stream_from=root.scheduler.stream_from, paper_switch=paper_switch(root), seeds=seeds,
                   seconds=time.perf_counter() - started)
    return figures


PARKING = {"on": ["sim.parking.enabled=true"], "off": ["sim.parking.enabled=false"]}
KEYS = ("vs_colocate", "vs_async_best", "vs_async_planned", "vs_ideal", "length_bias", "length_bias_all", "per_step_vs_colocate",
        "per_step_vs_async_best", "async_best_split", "colocate_vs_ideal", "async_vs_ideal", "max_vs_ideal",
        "async_length_bias", "elastic_switches", "elastic_aborted", "elastic_rollout_idle",
        "elastic_rollout_idle_capped", "async_rollout_idle", "async_train_idle", "cells", "batch_size",
        "max_staleness", "stream_from", "colocate_tokens_per_h", "async_tokens_per_h", "elastic_tokens_per_h",
        "slot_share", "sessions_per_cell", "slots_per_cell", "elastic_parked_tool_share",
        *(f"{k}_{end}" for k in SPREAD for end in ("min", "max")))


def parking_gain(on: dict[str, Any], off: dict[str, Any]) -> dict[str, float]:
    """What parking gives each policy in one scenario: trained policy tokens per hour, with over without."""
    return {f"parking_gain_{name}": on[f"{name}_tokens_per_h"] / off[f"{name}_tokens_per_h"]
            for name in ("colocate", "async", "elastic")}


def targets(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's checks over the grid: each a boolean plus the figure it was decided on."""
    worst = min(rows, key=lambda s: min(rows[s]["vs_colocate"], rows[s]["vs_async_best"]))  # medians over seeds
    scale = {s: r for s, r in rows.items() if r["cells"] in (128, 512) and r["paper_switch"]}
    keep = {s: r for s, r in rows.items() if r["stale_policy"] == "keep"}
    out: dict[str, Any] = {
        "worst_vs_baselines": min(rows[worst]["vs_colocate"], rows[worst]["vs_async_best"]),
        "worst_vs_baselines_scenario": worst,
        "never_2pct_slower": all(min(r["vs_colocate"], r["vs_async_best"]) >= 0.98 for r in rows.values()),
        "worst_vs_baselines_any_seed": min(min(r["vs_colocate_min"], r["vs_async_best_min"]) for r in rows.values()),
        "max_vs_ideal_any_policy": max(r["max_vs_ideal"] for r in rows.values()),
        "ideal_never_beaten": all(r["max_vs_ideal"] <= 1.0 for r in rows.values()),
    }
    if scale:
        out["min_vs_async_best_at_128_512"] = min(r["vs_async_best"] for r in scale.values())
        out["faster_than_async_1.3x_at_128_512"] = all(r["vs_async_best"] >= 1.3 for r in scale.values())
        # How much of elastic's idle rollout there the look-ahead forced (no dispatch allowed), worst scenario.
        out["min_capped_share_of_elastic_rollout_idle_at_128_512"] = min(
            r["elastic_rollout_idle_capped"] / r["elastic_rollout_idle"] for r in scale.values() if r["elastic_rollout_idle"])
    if keep:
        out["min_length_bias_default_policy"] = min(r["length_bias"] for r in keep.values())
        out["length_bias_at_least_0.9"] = all(r["length_bias"] >= 0.9 for r in keep.values())
    return out


def table(rows: dict[str, dict[str, Any]], title: str, gains: dict[str, dict[str, float]] | None = None) -> Table:
    out = Table(title=title)
    headers = ["scenario", "cells", "batch", "vs colocate", "vs async best (split)", "vs ideal", "length bias",
               "per step vs colocate", "per step vs async", "rollout idle (capped)", "switches", "host s"]
    if gains:
        headers.append("parking gain c/a/e")
    for header in headers:
        out.add_column(header, justify="left" if header == "scenario" else "right")
    for name, r in rows.items():
        cells = [name, str(r["cells"]), str(r["batch_size"]), f"{r['vs_colocate']:.2f}x",
                 f"{r['vs_async_best']:.2f}x ({r['async_best_split']:g})", f"{r['vs_ideal']:.2f}",
                 f"{r['length_bias']:.2f}", f"{r['per_step_vs_colocate']:.2f}x", f"{r['per_step_vs_async_best']:.2f}x",
                 f"{r['elastic_rollout_idle']:.2f} ({r['elastic_rollout_idle_capped']:.2f})", f"{r['elastic_switches']:g}",
                 f"{r['seconds']:.0f}"]
        if gains:
            g = gains[name]
            cells.append(f"{g['parking_gain_colocate']:.2f}/{g['parking_gain_async']:.2f}/{g['parking_gain_elastic']:.2f}")
        out.add_row(*cells)
    return out


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=None, help="run only these scenarios")
    parser.add_argument("--out", default=None, help="write the flat JSON object here")
    parser.add_argument("--seeds", type=int, default=1, help="workload seeds per scenario (figures: the median)")
    parser.add_argument("--stream-from", type=float, default=None,
                        help="scheduler.stream_from for every policy of every scenario (async and elastic start a "
                             "step on this share of its batch and the rest streams in)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="config overrides for every policy of every scenario, after the scenario's own "
                             "(e.g. scheduler.max_staleness=2 sim.train.weight_sync_s=0)")
    parser.add_argument("--parking", choices=("both", "on", "off"), default="both",
                        help="every policy with parking (sessions waiting on tools give back their slots), without, "
                             "or both grids side by side (default; the figures and targets are with parking)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args()
    malformed = [item for item in args.set if "=" not in item or item.startswith("=")]
    if malformed:
        parser.error(f"--set takes KEY=VALUE config overrides, got {' '.join(malformed)}")
    extra = [*args.set, *([f"scheduler.stream_from={args.stream_from}"] if args.stream_from is not None else [])]
    try:  # a bad override fails here, named, rather than in the middle of the grid
        Scenario("check").config(0, extra)
    except (ConfigError, ConfigCompositionException) as exc:
        parser.error(f"overrides {' '.join(extra)}: {exc}")
    console = Console(width=170)
    chosen = [s for s in SCENARIOS if args.only is None or s.name in args.only]
    if args.list or not chosen:
        for s in SCENARIOS:
            console.print(s.name, s.preset, " ".join(s.overrides), f"train_ratio={s.train_ratio}" if s.train_ratio else "")
        return {}
    modes = ["on", "off"] if args.parking == "both" else [args.parking]
    grids: dict[str, dict[str, dict[str, Any]]] = {mode: {} for mode in modes}
    started = time.perf_counter()
    for scenario in chosen:
        for mode in modes:
            grids[mode][scenario.name] = r = run(scenario, args.seeds, [*PARKING[mode], *extra])
            console.print(f"{scenario.name} (parking {mode}): vs colocate {r['vs_colocate']:.2f}x, vs async best "
                          f"{r['vs_async_best']:.2f}x (split {r['async_best_split']}), vs ideal {r['vs_ideal']:.2f}, "
                          f"length bias {r['length_bias']:.2f} [{r['seconds']:.0f} s]")
    main_rows = grids[modes[0]]
    gains = {name: parking_gain(grids["on"][name], grids["off"][name]) for name in main_rows} if len(modes) == 2 else None
    console.print(table(main_rows, f"elastic on equal work (trained work per hour), simulated (gyre/sim), parking "
                                   f"{modes[0]}", gains))
    if len(modes) == 2:
        console.print(table(grids["off"], "the same grid without parking"))
    flat: dict[str, Any] = {}
    for name, r in main_rows.items():
        flat.update({f"{name}.{key}": r[key] for key in KEYS})
        if gains:
            flat.update({f"{name}.{key}": value for key, value in gains[name].items()})
            flat.update({f"{name}.without_parking.{key}": grids["off"][name][key] for key in KEYS})
    checks = targets(main_rows)
    flat.update({f"targets.{k}": v for k, v in checks.items()})
    for key, value in checks.items():
        console.print(f"{key}: {value}")
    if len(modes) == 2:
        flat.update({f"targets_without_parking.{k}": v for k, v in targets(grids["off"]).items()})
        console.print(f"without parking: vs async best at 128/512 "
                      f"{flat.get('targets_without_parking.min_vs_async_best_at_128_512', float('nan')):.3f}, worst vs "
                      f"baselines {flat['targets_without_parking.worst_vs_baselines']:.3f}")
    flat["overrides"] = extra
    flat["parking"] = args.parking
    flat["host_seconds"] = time.perf_counter() - started
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(flat, handle, indent=2)
    return flat


if __name__ == "__main__":
    main()
