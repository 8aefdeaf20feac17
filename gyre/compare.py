"""Compare runs side by side: ``python -m gyre.compare runs/<sweep> [--out compare.png]``.

Takes a sweep folder (Hydra multirun: one subfolder per job) or several run folders, reads each run's
``metrics.jsonl`` and the overrides that made it (``.hydra/overrides.yaml``), and plots reward, training
pass rate, held-out pass rate (when validated) and step time against the step, one line per run labelled
by its overrides, into one PNG. Prints a table of each run's last values.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from gyre.plots import metric_series

PANELS = (  # (metric, title)
    ("reward/mean", "reward (training executions)"),
    ("pass_rate", "pass rate (training executions)"),
    ("val/pass_rate", "held-out pass rate"),
    ("step_time_s", "step time (s)"),
)


@dataclass
class Run:
    folder: Path
    label: str
    rows: list[dict] = field(default_factory=list)

    def series(self, key: str) -> tuple[list[float], list[float]]:
        return metric_series(self.rows, key)


def overrides_of(folder: Path) -> list[str]:
    import yaml

    path = folder / ".hydra" / "overrides.yaml"
    return [str(item) for item in (yaml.safe_load(path.read_text()) or [])] if path.is_file() else []


def find_runs(paths: list[Path]) -> list[Run]:
    """Every folder holding a metrics.jsonl: the paths themselves, or their subfolders (a sweep)."""
    folders: list[Path] = []
    for path in paths:
        if (path / "metrics.jsonl").is_file():
            folders.append(path)
        elif path.is_dir():
            folders.extend(sorted(p.parent for p in path.glob("*/metrics.jsonl")))
        else:
            raise FileNotFoundError(f"{path} does not exist")
    if not folders:
        raise FileNotFoundError(f"no run (a folder with metrics.jsonl) in {', '.join(map(str, paths))}")
    runs = []
    for folder in folders:
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
        overrides = overrides_of(folder)
        shared = set.intersection(*(set(overrides_of(f)) for f in folders)) if len(folders) > 1 else set()
        label = ", ".join(o for o in overrides if o not in shared and not o.startswith("run_dir=")) or folder.name
        runs.append(Run(folder, label, rows))
    return runs


def plot(runs: list[Run], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(key, title) for key, title in PANELS if any(run.series(key)[0] for run in runs)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels):
        for run in runs:
            steps, values = run.series(key)
            ax.plot(steps, values, marker="o", markersize=3, label=run.label)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(frameon=False, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gyre.compare", description=__doc__.split("\n\n")[0],
                                     epilog="example: python -m gyre.compare runs/sweep_2026-12-01_10-00-00")
    parser.add_argument("paths", type=Path, nargs="+", help="a sweep folder, or run folders")
    parser.add_argument("--out", type=Path, default=None, help="PNG to write (default: <first path>/compare.png)")
    args = parser.parse_args(argv)
    runs = find_runs(args.paths)
    out = args.out or args.paths[0] / "compare.png"
    plot(runs, out)
    width = max(len(run.label) for run in runs)
    print(f"{'run':<{width}}  steps  reward  pass_rate  val/pass_rate  step_time_s")
    for run in runs:
        last = {key: (run.series(key)[1] or [float("nan")])[-1] for key, _ in PANELS}
        print(f"{run.label:<{width}}  {len(run.rows):>5}  {last['reward/mean']:>6.3f}  {last['pass_rate']:>9.3f}  "
              f"{last['val/pass_rate']:>13.3f}  {last['step_time_s']:>11.2f}")
    print(f"plot: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
