"""Metrics to wandb (offline without an API key), the console and a jsonl file; the cell-role timeline plot.

The wandb step is the training step and only ever increases; the run is finished on exit or error
(``Tracker`` is a context manager).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console

log = logging.getLogger(__name__)

ROLE_COLOURS = {"rollout": "#4C72B0", "train": "#DD8452", "switching": "#C44E52", "idle": "#DDDDDD", "dead": "#000000"}


class Tracker:
    def __init__(self, run_dir: str | Path, *, backends: list[str], project: str = "gyre", run_name: str | None = None,
                 config: dict[str, Any] | None = None, wandb_mode: str | None = None):
        unknown = set(backends) - {"console", "jsonl", "wandb"}
        if unknown:
            raise ValueError(f"tracking.backends: unknown {sorted(unknown)}; choose from console, jsonl, wandb")
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.backends = backends
        self.console = Console()
        self._last_step = -1
        self._jsonl = open(self.run_dir / "metrics.jsonl", "a") if "jsonl" in backends else None
        self._wandb = None
        if "wandb" in backends:
            import wandb

            mode = wandb_mode or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
            self._wandb = wandb.init(project=project, name=run_name, config=config or {}, dir=str(self.run_dir),
                                     mode=mode, reinit="finish_previous")

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if step < self._last_step:
            raise ValueError(f"tracking step went backwards: {step} after {self._last_step}")
        self._last_step = step
        clean = {k: _plain(v) for k, v in metrics.items()}
        if self._jsonl is not None:
            self._jsonl.write(json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
            self._jsonl.flush()
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in clean.items() if isinstance(v, (int, float))}, step=step)
        if "console" in self.backends:
            keys = ["reward/mean", "pass_rate", "loss", "grad_norm", "step_time_s", "staleness/mean", "tree_token_ratio"]
            shown = "  ".join(f"{k}={clean[k]:.4g}" for k in keys if isinstance(clean.get(k), (int, float)))
            self.console.print(f"[bold]step {step}[/bold]  {shown}")

    def log_image(self, key: str, path: Path, step: int) -> None:
        if self._wandb is not None:
            import wandb

            self._wandb.log({key: wandb.Image(str(path))}, step=max(step, self._last_step))

    def finish(self, exit_code: int = 0) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self._wandb is not None:
            self._wandb.finish(exit_code=exit_code)
            self._wandb = None

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish(exit_code=0 if exc_type is None else 1)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def plot_timeline(timelines: dict[str, list[tuple[float, str]]], until: float, path: str | Path,
                  title: str = "cell roles over time") -> Path:
    """One horizontal bar per cell, coloured by role. ``timelines[cell] = [(start_time, role), ...]``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    origin = min((t for events in timelines.values() for t, _ in events), default=0.0)
    fig, ax = plt.subplots(figsize=(11, max(2.0, 0.8 + 0.45 * len(timelines))))
    for row, (cell, events) in enumerate(sorted(timelines.items(), reverse=True)):
        for (start, role), (end, _) in zip(events, events[1:] + [(until, None)]):
            ax.barh(row, end - start, left=start - origin, color=ROLE_COLOURS.get(role, "#999999"), height=0.8)
    ax.set_yticks(range(len(timelines)), sorted(timelines, reverse=True))
    ax.set_xlabel("seconds")
    ax.set_title(title)
    ax.legend(handles=[Patch(color=c, label=r) for r, c in ROLE_COLOURS.items() if r != "dead"],
              loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_curves(path: str | Path, steps: list[float], series: dict[str, list[float]], *, title: str,
                xlabel: str = "step", ylabel: str = "") -> Path:
    """Line plot of one or more series against ``steps`` (e.g. a loss curve), written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in series.items():
        ax.plot(steps[: len(values)], values, label=label, marker="o" if len(values) <= 30 else None, markersize=3)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
