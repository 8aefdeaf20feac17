"""Does RL improve the agent? The learning recipe end to end, against a control whose reward is shuffled.

    python benchmarks/learning.py --out learning.json [--seeds 0 1 2] [--steps N] [--override KEY=VALUE ...]

For each seed, from a clean cache (a fresh ``GYRE_CACHE``, unless ``--cache`` names one): builds the small
model, records demonstrations of the learn suite and trains the supervised warm start, then runs
``python -m gyre.main +recipe=learn`` (elastic scheduler, 4 cells), which validates on the held-out tasks
before the first step and after the last. Then the control: the same run from the same warm start with
``trajectory.shuffle_rewards=true`` (rewards permuted across each step's executions before advantages, so
the updates carry no signal). Pass rate = share of held-out executions with full credit.

JSON keys (the first seed's, plus ``<key>_seeds`` lists and medians over seeds when several are run):
``val_pass_rate_before``, ``val_pass_rate_after``, ``gain``, ``control_pass_rate_before``,
``control_pass_rate_after``, ``control_gain``, ``steps``, ``wall_s`` (the whole benchmark of that seed:
build, demonstrations, SFT, RL, control), ``warm_start_s``, ``rl_s``, ``control_s``. Also writes
``learning_curve.png`` (held-out pass rate against the step, RL and control) next to the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recipe_steps() -> int:
    """The recipe's own RL steps (``trainer.total_steps`` of conf/recipe/learn.yaml)."""
    import yaml

    return int(yaml.safe_load((ROOT / "conf/recipe/learn.yaml").read_text())["trainer"]["total_steps"])


def run_job(run_dir: Path, seed: int, steps: int, cache: Path, extra: list[str], log: Path) -> float:
    """One ``gyre.main`` run; returns its wall time. Its output goes to ``log``."""
    command = [sys.executable, "-m", "gyre.main", "+recipe=learn", f"seed={seed}", f"run_dir={run_dir}",
               f"trainer.total_steps={steps}", "harness.progress=false", "tracking.backends=[jsonl]", *extra]
    started = time.perf_counter()
    with log.open("w") as handle:
        done = subprocess.run(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                              env={**os.environ, "GYRE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled"})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}); see {log}")
    return time.perf_counter() - started


def validations(run_dir: Path) -> dict[int, float]:
    """Held-out pass rate by step, from the run's metrics.jsonl."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_step: dict[int, float] = {}
    for row in rows:
        if "val/pass_rate" in row:
            by_step[int(row["val/step"])] = float(row["val/pass_rate"])
    return dict(sorted(by_step.items()))


def one_seed(seed: int, steps: int, work: Path, cache: Path | None, overrides: list[str]) -> dict:
    cache = cache or work / "cache"
    started = time.perf_counter()
    # The warm start (model build, demonstrations, SFT) happens inside the first run; time it separately by
    # building it alone first: a 0-step run builds it and validates the starting policy once.
    warm_start_s = run_job(work / "warm_start", seed, 0, cache, [*overrides, "trainer.val_every=0"], work / "warm_start.log")
    rl_s = run_job(work / "rl", seed, steps, cache, overrides, work / "rl.log")
    control_s = run_job(work / "control", seed, steps, cache,
                        [*overrides, "trajectory.shuffle_rewards=true", f"trainer.val_every={steps}"], work / "control.log")
    rl, control = validations(work / "rl"), validations(work / "control")
    result = {
        "seed": seed, "steps": steps,
        "val_pass_rate_before": rl[min(rl)], "val_pass_rate_after": rl[max(rl)],
        "control_pass_rate_before": control[min(control)], "control_pass_rate_after": control[max(control)],
        "warm_start_s": warm_start_s, "rl_s": rl_s, "control_s": control_s, "wall_s": time.perf_counter() - started,
        "curve": {"rl": rl, "control": control},
    }
    result["gain"] = result["val_pass_rate_after"] - result["val_pass_rate_before"]
    result["control_gain"] = result["control_pass_rate_after"] - result["control_pass_rate_before"]
    return result


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for index, result in enumerate(results):  # one colour per seed: RL solid, its control dashed
        for name, style in (("rl", "-"), ("control", "--")):
            curve = result["curve"][name]
            label = f"{'RL' if name == 'rl' else 'control (shuffled reward)'}, seed {result['seed']}"
            ax.plot(list(curve), list(curve.values()), style, color=f"C{index}", marker="o", markersize=3, label=label)
    ax.set_xlabel("RL step")
    ax.set_ylabel("held-out pass rate")
    ax.set_title("learn suite: held-out pass rate")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=None, help="RL steps of each run (default: the recipe's)")
    parser.add_argument("--cache", type=Path, default=None, help="reuse this GYRE_CACHE instead of a clean one")
    parser.add_argument("--work", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra Hydra overrides of every run (e.g. env.path=... for a smaller suite)")
    args = parser.parse_args()
    steps = recipe_steps() if args.steps is None else args.steps
    results = []
    for seed in args.seeds:
        work = (args.work or Path(tempfile.mkdtemp(prefix="gyre-learning-"))) / f"seed{seed}"
        work.mkdir(parents=True, exist_ok=True)
        print(f"seed {seed}: runs in {work}", flush=True)
        result = one_seed(seed, steps, work, args.cache, args.override)
        results.append(result)
        print(f"seed {seed}: held-out pass rate {result['val_pass_rate_before']:.3f} -> {result['val_pass_rate_after']:.3f} "
              f"(gain {result['gain']:+.3f}); control {result['control_pass_rate_before']:.3f} -> "
              f"{result['control_pass_rate_after']:.3f} ({result['control_gain']:+.3f}); {result['wall_s']:.0f} s", flush=True)
    output = {k: v for k, v in results[0].items() if k != "curve"}
    if len(results) > 1:
        for key in ("val_pass_rate_before", "val_pass_rate_after", "gain", "control_pass_rate_after", "control_gain", "wall_s"):
            values = [r[key] for r in results]
            output[f"{key}_seeds"] = values
            output[f"{key}_median"] = statistics.median(values)
    output["curves"] = {str(r["seed"]): r["curve"] for r in results}
    if args.out:
        args.out.write_text(json.dumps(output, indent=1))
        plot(results, args.out.with_name("learning_curve.png"))
        print(f"wrote {args.out} and {args.out.with_name('learning_curve.png')}")
    else:
        print(json.dumps(output, indent=1))


if __name__ == "__main__":
    main()
