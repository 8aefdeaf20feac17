"""The driver SIGKILLed at random points and resumed, twice, then run to its end (the kill part of
``benchmarks/reliability.py``, as a user runs it): no step lost or trained twice, no record lost, nothing
of a killed job left running but Ray's own agents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_driver_killed_twice_and_resumed(tmp_path) -> None:
    out = tmp_path / "kills.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/reliability.py", "--parts", "kills", "--kills", "2", "--steps", "8",
         "--seed", "3", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, check=False,
    )
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["driver_kills"] == 2, figures["kill_points"]
    assert figures["kill_final_run_finished"], figures["kill_final_stderr"]
    assert figures["steps_lost"] == figures["steps_repeated"] == figures["records_lost"] == 0, figures
    assert figures["kill_final_steps_done"] == figures["kill_final_version"] == 8
    assert figures["kill_records_at_end"] > 0
    # 15 s after a kill nothing of the job runs but, when it is killed while Ray starts, Ray's own agents
    # (they exit by themselves about a minute later): no driver, no sandboxed agent.
    assert all(name.startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent")) for name in figures["kill_leftover_examples"]), figures
