"""The run's figures, redrawn as it goes (into ``<run_dir>`` and the tracker): ``curves.png`` (every logged
step and validation), ``val_curve.png`` (held-out validation), ``timeline.png`` (every cell's roles). The
drawing itself is ``gyre.plots``; this module feeds it the driver's rows.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gyre.trainer.fit import Driver


def plot_curves(driver: Driver) -> Path:
    """Reward, pass rate, loss and step time against the step: ``<run_dir>/curves.png``, redrawn each step."""
    from gyre import plots

    return plots.plot_run_curves(driver.curve_rows, driver.run_dir / "curves.png",
                                 title=f"{driver.policy.name}, step {driver.steps_done}")


def plot_validation(driver: Driver) -> Path:
    """Held-out pass rate and score against the training step: ``<run_dir>/val_curve.png`` (and wandb)."""
    from gyre import plots

    steps = [row["step"] for row in driver.val_history]
    series = {"pass rate (full credit)": [row["val/pass_rate"] for row in driver.val_history],
              "score (mean reward)": [row["val/score"] for row in driver.val_history]}
    path = plots.plot_curves(driver.run_dir / "val_curve.png", steps, series, title="held-out validation", ylabel="fraction")
    driver.tracker.log_image("val_curve", path, driver.steps_done)
    return path


def plot_timeline(driver: Driver) -> Path:
    """Every cell's roles over the whole run, earlier sessions of a resumed run included:
    ``<run_dir>/timeline.png`` (and wandb), from ``timeline.jsonl``."""
    from gyre import plots

    driver.timeline.record(driver.cluster.membership.timeline, seen=True)
    timelines, resumes = driver.timeline.load()
    path = plots.plot_timeline(timelines, time.time(), driver.run_dir / "timeline.png", resumes=resumes,
                               title=f"cell roles ({driver.policy.name}), step {driver.steps_done}")
    driver.tracker.log_image("timeline", path, driver.steps_done)
    return path


def earlier_curve_rows(driver: Driver) -> list[dict[str, Any]]:
    """The rows a resumed run logged before (its metrics.jsonl, when the jsonl backend wrote one)."""
    path = driver.run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a killed process
        if row.get("step", math.inf) <= driver.steps_done:
            rows.append(row)
    return rows
