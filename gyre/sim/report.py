"""Present results: a rich table, a JSON document, and a PNG of the cells' roles over time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from gyre.plots import ROLE_COLOURS
from gyre.sim.result import SimResult

ROLE_CODE = {role: code for code, role in enumerate(ROLE_COLOURS)}


def ratios(results: list[SimResult]) -> dict[str, float]:
    """Elastic's speedup over each other policy on equal work (its trained work per hour / theirs), when
    elastic ran."""
    by_name = {r.policy: r for r in results}
    if "elastic" not in by_name:
        return {}
    elastic = by_name["elastic"].work_rate
    return {f"elastic_vs_{name}": elastic / r.work_rate for name, r in by_name.items() if name != "elastic"}


def table(results: list[SimResult], title: str = "") -> Table:
    first = results[0]
    parking = f" ({first.slots_per_cell} slots, parking)" if first.parking else ""
    caption = (f"{first.cells} cells x {first.gpus_per_cell} GPUs, {first.capacity_per_cell} sessions/cell{parking}, "
               f"{first.steps} steps of {first.batch_size}, max_staleness={first.max_staleness}, "
               f"max_paths={first.max_paths}; ideal = the policy's trained work / all cells; "
               "length bias = mean work of trained / of dispatched executions")
    out = Table(title=title or first.preset, caption=caption)
    for header in ("policy", "wall h", "step s", "ideal h", "of ideal", "length bias", "GPU idle", "rollout idle",
                   "train idle", "switching", "stale mean", "stale max", "switches", "dropped", "aborted"):
        out.add_column(header, justify="left" if header == "policy" else "right")
    for r in results:
        name = r.policy + (f" ({r.rollout_cells} roll)" if r.rollout_cells is not None else "")
        out.add_row(name, f"{r.wall_time_s / 3600:.2f}", f"{r.wall_time_s / r.steps:.0f}",
                    f"{r.ideal_time_s / 3600:.2f}", f"{r.vs_ideal:.2f}", f"{r.length_bias:.2f}", f"{r.gpu_idle:.1%}",
                    f"{r.rollout_idle:.1%}", f"{r.train_idle:.1%}", f"{r.fraction('switching'):.1%}",
                    f"{r.staleness_mean:.2f}", str(r.staleness_max), str(r.switches), f"{r.dropped}/{r.dispatched}",
                    str(r.aborted))
    return out


def print_results(results: list[SimResult], console: Console | None = None) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=170)  # piped or captured: do not squeeze the table to 80 columns
    console.print(table(results))
    for key, value in ratios(results).items():
        console.print(f"{key}: {value:.3f}x (trained work per hour)")


def document(results: list[SimResult], config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"preset": results[0].preset, "config": config, "ratios": ratios(results),
            "results": {r.policy: r.to_dict() for r in results}}


def write_json(path: Path, results: list[SimResult], config: dict[str, Any] | None = None) -> None:
    path.write_text(json.dumps(document(results, config), indent=2))


def role_image(result: SimResult, bins: int = 1200) -> np.ndarray:
    """Cells x time-bins matrix of role codes (the role at each bin's start)."""
    wall = result.timeline["wall"]
    edges = np.linspace(0.0, wall, bins, endpoint=False)
    image = np.full((result.cells, bins), ROLE_CODE["idle"], dtype=float)
    per_cell: dict[int, list[tuple[float, str]]] = {}
    for when, cell, role in result.timeline["roles"]:
        per_cell.setdefault(cell, []).append((when, role))
    for cell, changes in per_cell.items():
        times = np.array([when for when, _ in changes])
        codes = np.array([ROLE_CODE[role] for _, role in changes], dtype=float)
        pos = np.searchsorted(times, edges, side="right") - 1
        image[cell] = np.where(pos >= 0, codes[np.maximum(pos, 0)], ROLE_CODE["idle"])
    return image


def write_png(path: Path, results: list[SimResult]) -> None:
    """One panel per policy: cells' roles over time, with live/ready executions and training cells below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap(list(ROLE_COLOURS.values()))
    fig, axes = plt.subplots(2 * len(results), 1, figsize=(12, 4.2 * len(results)),
                             gridspec_kw={"height_ratios": [3, 1] * len(results)}, squeeze=False)
    for i, result in enumerate(results):
        wall_h = result.timeline["wall"] / 3600
        top, bottom = axes[2 * i][0], axes[2 * i + 1][0]
        top.imshow(role_image(result), aspect="auto", interpolation="nearest", cmap=cmap, vmin=-0.5,
                   vmax=len(ROLE_COLOURS) - 0.5, extent=(0, wall_h, result.cells - 0.5, -0.5))
        top.set_ylabel("cell")
        top.set_title(f"{result.preset} / {result.policy}: {wall_h:.2f} h (ideal {result.ideal_time_s / 3600:.2f} h), "
                      f"{result.switches} switches")
        samples = np.array(result.timeline["samples"]) if result.timeline["samples"] else np.zeros((0, 4))
        if len(samples):
            bottom.step(samples[:, 0] / 3600, samples[:, 1], where="post", label="live executions", color=ROLE_COLOURS["rollout"])
            bottom.step(samples[:, 0] / 3600, samples[:, 2], where="post", label="ready", color="#9c27b0")
            twin = bottom.twinx()
            twin.step(samples[:, 0] / 3600, samples[:, 3], where="post", color=ROLE_COLOURS["train"], alpha=0.6)
            twin.set_ylabel("train cells", color=ROLE_COLOURS["train"])
        bottom.set_xlim(0, wall_h)
        bottom.set_xlabel("hours")
        bottom.legend(loc="upper right", fontsize=8)
    fig.legend(handles=[Patch(color=c, label=r) for r, c in ROLE_COLOURS.items() if r != "dead"], loc="upper center",
               ncol=4, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=110)
    plt.close(fig)
