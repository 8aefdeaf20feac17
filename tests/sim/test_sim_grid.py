"""benchmarks/sim_grid.py: config overrides for every scenario (``--set``), and bad ones named up front."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

GRID = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_grid.py"


def grid(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GRID), "--only", "cells_2", *args], capture_output=True, text=True,
                          timeout=300)


def test_set_overrides_every_scenario_and_is_recorded(tmp_path):
    out = tmp_path / "grid.json"
    done = grid("--set", "scheduler.max_staleness=0", "sim.steps=3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["overrides"] == ["scheduler.max_staleness=0", "sim.steps=3"]
    assert figures["cells_2.max_staleness"] == 0
    default = tmp_path / "default.json"
    assert grid("--set", "sim.steps=3", "--out", str(default)).returncode == 0
    assert json.loads(default.read_text())["cells_2.max_staleness"] == 1  # the base's look-ahead otherwise


def test_bad_overrides_are_named_before_anything_runs():
    for args, message in ((["--set", "max_staleness"], "--set takes KEY=VALUE config overrides, got max_staleness"),
                          (["--set", "sim.nope=1"], "Could not override 'sim.nope'"),
                          (["--set", "scheduler.max_staleness=-1"], "scheduler.max_staleness: must be >= 0"),
                          (["--stream-from", "5"], "scheduler.stream_from: must be in (0, 1]")):
        done = grid(*args)
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_grid_with_parking_and_without_side_by_side(tmp_path):
    out = tmp_path / "both.json"
    done = grid("--set", "sim.steps=3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["parking"] == "both" and figures["cells_2.slot_share"] < 1.0  # the figures: with parking
    assert figures["cells_2.without_parking.slot_share"] == 1.0
    assert figures["cells_2.sessions_per_cell"] > figures["cells_2.without_parking.sessions_per_cell"]
    for policy in ("colocate", "async", "elastic"):
        gain = figures[f"cells_2.parking_gain_{policy}"]
        assert gain == figures[f"cells_2.{policy}_tokens_per_h"] / figures[f"cells_2.without_parking.{policy}_tokens_per_h"]
    assert figures["targets.ideal_never_beaten"] and figures["targets_without_parking.ideal_never_beaten"]
    off = tmp_path / "off.json"
    assert grid("--set", "sim.steps=3", "--parking", "off", "--out", str(off)).returncode == 0
    alone = json.loads(off.read_text())
    assert alone["cells_2.vs_async_best"] == figures["cells_2.without_parking.vs_async_best"]  # deterministic per seed
    assert "cells_2.parking_gain_elastic" not in alone
