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
    # 15 s after a kill nothing of the job runs but Ray's own processes (its workers notice a killed raylet
    # late on a loaded machine): no driver, no sandboxed agent; a minute later at most Ray's agents, which
    # exit by themselves a little after that when the job was killed while Ray started.
    assert all(_is_rays(name) for name in figures["kill_leftover_examples"]), (
        figures["kill_leftover_examples"], figures["kill_points"])
    assert all(name.startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent")) for name in figures["kill_late_leftover_examples"]), (
        figures["kill_late_leftover_examples"], figures["kill_points"])


def _is_rays(command_line: str) -> bool:
    return command_line.startswith("ray::") or "/site-packages/ray/" in command_line
