"""benchmarks/sim_breakdown.py: each policy's steady steps split into the wait for a batch and the step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BREAKDOWN = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_breakdown.py"


def breakdown(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BREAKDOWN), *args], capture_output=True, text=True, timeout=300)


def test_the_split_covers_every_cell_second_and_the_free_training_ceiling_bounds_elastic(tmp_path):
    out = tmp_path / "breakdown.json"
    done = breakdown("--only", "cells_2", "--async-split", "1", "--parking", "on", "--free-training", "--out", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    prefix = "cells_2.parking_on"
    for policy in ("colocate", "async", "elastic"):
        row = {key[len(f"{prefix}.{policy}."):]: value for key, value in figures.items()
               if key.startswith(f"{prefix}.{policy}.")}
        assert row["wait_s"] + row["step_phase_s"] == pytest.approx(row["step_s"], rel=1e-9)
        shares = sum(value for key, value in row.items() if key.startswith(("wait.", "step.")))
        assert shares == pytest.approx(1.0, rel=1e-9)
        assert row["wait.train_compute"] == 0.0  # nothing computes between steps
    assert figures[f"{prefix}.async.rollout_cells"] == 1
    # training made free can only make elastic faster: a ceiling, not a figure it reaches
    assert figures[f"{prefix}.elastic_free_training_vs_async_best"] > figures[f"{prefix}.elastic_vs_async_tokens"]
    assert figures[f"{prefix}.elastic_free_training_step_s"] < figures[f"{prefix}.elastic.step_s"]


def test_unknown_scenarios_are_named():
    done = breakdown("--only", "nope")
    assert done.returncode == 2 and "unknown scenarios nope" in done.stderr
