"""Every plot a run writes, on matplotlib's Agg backend (no display; cheap enough to redraw each step).

``ROLE_COLOURS`` is the one colour scheme for cell roles: the training run's ``timeline.png`` and the
simulator's ``roles.png`` both use it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

ROLE_COLOURS = {"rollout": "#4caf50", "train": "#1e63b4", "switching": "#ff9800", "idle": "#bdbdbd", "dead": "#000000"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, dpi: int = 100) -> Path:
    """Lay out, write (creating the folder) and close ``fig``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_timeline(timelines: dict[str, list[tuple[float, str]]], until: float, path: str | Path,
                  title: str = "cell roles over time", resumes: list[float] = ()) -> Path:
    """One horizontal bar per cell, coloured by role. ``timelines[cell] = [(start_time, role), ...]``; a
    cell's last role lasts until ``until``. The role ``stopped`` (no process ran the cells) is left empty
    and each time in ``resumes`` gets a dashed line."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    origin = min((t for events in timelines.values() for t, _ in events), default=0.0)
    fig, ax = plt.subplots(figsize=(11, max(2.0, 0.8 + 0.45 * len(timelines))))
    for row, (cell, events) in enumerate(sorted(timelines.items(), reverse=True)):
        for (start, role), (end, _) in zip(events, events[1:] + [(until, None)]):
            if role != "stopped":
                ax.barh(row, end - start, left=start - origin, color=ROLE_COLOURS.get(role, "#999999"), height=0.8)
    for at in resumes:
        ax.axvline(at - origin, color="#444444", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(timelines)), sorted(timelines, reverse=True))
    ax.set_xlabel("seconds")
    ax.set_title(title)
    handles = [Patch(color=c, label=r) for r, c in ROLE_COLOURS.items() if r != "dead"]
    if resumes:
        handles.append(plt.Line2D([], [], color="#444444", linestyle="--", label="resumed"))
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return save_figure(fig, path)


def plot_curves(path: str | Path, steps: list[float], series: dict[str, list[float]], *, title: str,
                xlabel: str = "step", ylabel: str = "") -> Path:
    """Line plot of one or more series against ``steps`` (e.g. a loss curve), written to ``path``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in series.items():
        ax.plot(steps[: len(values)], values, label=label, marker="o" if len(values) <= 30 else None, markersize=3)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    return save_figure(fig, path)


# (panel title, [(metric, label)]) of curves.png; a validation metric is plotted against ``val/step``
RUN_PANELS = (
    ("reward", [("reward/mean", "mean reward (training executions)")]),
    ("pass rate", [("pass_rate", "training executions"), ("val/pass_rate", "held-out (validation)")]),
    ("loss", [("loss", "policy loss")]),
    ("step time (s)", [("step_time_s", "wall seconds per step")]),
)


def metric_series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of ``key`` over metric rows, finite numbers only; ``val/*`` against ``val/step``."""
    points = [(row.get("val/step", row["step"]) if key.startswith("val/") else row["step"], row[key])
              for row in rows if isinstance(row.get(key), (int, float)) and math.isfinite(row[key])]
    return [step for step, _ in points], [value for _, value in points]


def plot_run_curves(rows: list[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Reward, pass rate (and held-out pass rate), loss and step time against the step, one panel each."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(RUN_PANELS), figsize=(4.0 * len(RUN_PANELS), 3.4))
    for ax, (panel, series) in zip(axes, RUN_PANELS):
        for key, label in series:
            steps, values = metric_series(rows, key)
            if steps:
                ax.plot(steps, values, marker="o" if len(steps) <= 30 else None, markersize=3, label=label)
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        if ax.lines and len(series) > 1:
            ax.legend(frameon=False, fontsize=7)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, dpi=90)
