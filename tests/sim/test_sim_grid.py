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
