"""Does the simulator predict this machine? Calibrate on a measured colocate run, then compare the
simulated step time of every policy with the measured one.

    python benchmarks/sim_validation.py --out sim_validation.json            # runs benchmarks/schedulers.py first
    python benchmarks/sim_validation.py --runs DIR --out sim_validation.json # reuse `schedulers.py --keep DIR`
    python benchmarks/sim_validation.py --runs DIR --write-preset            # also refresh conf/sim/calibrated.yaml

Only the colocate run is fitted (``gyre/sim/calibrate.py``); async and elastic are predictions. Each
policy is simulated with the measured run's own scheduler settings (batch, staleness, async's split) for
``--sim-steps`` steps at ``--seeds`` workload seeds, and compared on the steady-state step time (mean step
time after the first, which also fills the pipeline), the figure ``schedulers.py`` reports. The measured
figure is itself a mean of few heavy-tailed steps: ``measured_sem_P`` is its standard error.

``--out FILE`` writes a flat JSON object: ``measured_step_s_P``, ``simulated_step_s_P``, ``error_P``
(simulated / measured - 1), ``within_20pct_P`` for each policy P, and ``max_abs_error``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from schedulers import steady_step_times

from gyre.sim.calibrate import (
    fit,
    fitted_config,
    read_metrics,
    write_preset,
    write_trace,
)
from gyre.sim.config import CONF_DIR
from gyre.sim.run import simulate

POLICIES = ("colocate", "async", "elastic")
TOLERANCE = 0.2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=None, help="folder of `benchmarks/schedulers.py --keep` (else run it)")
    parser.add_argument("--steps", type=int, default=8, help="measured steps per policy when running the benchmark")
    parser.add_argument("--sim-steps", type=int, default=40, help="simulated steps per policy and seed")
    parser.add_argument("--seeds", type=int, default=3, help="workload seeds averaged per policy")
    parser.add_argument("--write-preset", action="store_true", help="write the fit to conf/sim/calibrated.yaml")
    parser.add_argument("--out", default=None, help="write a flat JSON object here")
    return parser.parse_args()


def measured(run: Path) -> dict[str, float | dict]:  # steady state as benchmarks/schedulers.py defines it
    """Steady step time (mean after the first step), its standard error, and the run's scheduler block."""
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    times = np.asarray(steady_step_times(steps))
    sem = float(times.std(ddof=1) / np.sqrt(len(times))) if len(times) > 1 else float("nan")
    return {"step_s": float(times.mean()), "sem": sem, "scheduler": steps[0]["scheduler"]}


def main() -> dict[str, float]:
    args = parse_args()
    console = Console()
    runs = Path(args.runs) if args.runs else Path(tempfile.mkdtemp(prefix="gyre-sim-validation-"))
    if not args.runs:
        console.print(f"[bold]measuring[/bold]: benchmarks/schedulers.py --steps {args.steps} --keep {runs}")
        subprocess.run([sys.executable, str(Path(__file__).with_name("schedulers.py")), "--steps", str(args.steps),
                        "--keep", str(runs)], check=True)
    source = runs / "colocate" / "metrics.jsonl"
    fitted = fit(read_metrics(source))
    if args.write_preset:
        note = "benchmarks/schedulers.py colocate run (tiny model, 4 CPU cells, tool delay lognormal(0, 1.2) per turn)"
        fitted = write_preset(fitted, CONF_DIR / "sim" / "calibrated.yaml", source.name, note)
        console.print(f"wrote {CONF_DIR / 'sim' / 'calibrated.yaml'}")
    else:
        fitted = write_trace(fitted, runs / "calibrated_trace.jsonl")
    console.print(f"workload: {fitted['sim']['workload']['trace'] or 'log-normal (the run logged no per-execution split)'}")

    flat: dict[str, float] = {}
    table = Table(title="simulated vs measured step time (calibrated on the colocate run)")
    for column in ("policy", "measured s", "± sem", "simulated s", "error", f"within {TOLERANCE:.0%}"):
        table.add_column(column, justify="right")
    for policy in POLICIES:
        if not (runs / policy / "metrics.jsonl").is_file():
            continue
        real = measured(runs / policy)
        sched = real["scheduler"]
        overrides = [f"sim.steps={args.sim_steps}", f"scheduler.batch_size={sched['batch_size']}"]
        if policy != "colocate":
            overrides += [f"scheduler.max_staleness={sched['max_staleness']}",
                          f"scheduler.rollout_cells={sched['rollout_cells']}"]
            if "stale_policy" in sched:  # logged by runs since the key moved to the scheduler group
                overrides.append(f"scheduler.stale_policy={sched['stale_policy']}")
        simulated = float(np.mean([simulate(fitted_config(fitted, [*overrides, f"sim.seed={seed}"]), [policy])[0]
                                   .steady_step_s for seed in range(args.seeds)]))
        error = simulated / real["step_s"] - 1
        flat |= {f"measured_step_s_{policy}": real["step_s"], f"measured_sem_{policy}": real["sem"],
                 f"simulated_step_s_{policy}": simulated, f"error_{policy}": error,
                 f"within_20pct_{policy}": abs(error) <= TOLERANCE}
        table.add_row(policy, f"{real['step_s']:.2f}", f"{real['sem']:.2f}", f"{simulated:.2f}", f"{error:+.1%}",
                      "yes" if abs(error) <= TOLERANCE else "no")
    console.print(table)
    flat["max_abs_error"] = max(abs(v) for k, v in flat.items() if k.startswith("error_"))
    if args.out:
        Path(args.out).write_text(json.dumps(flat, indent=2))
    return flat


if __name__ == "__main__":
    main()
