"""Killing the driver mid-run and resuming: no step repeated or lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SMALL = [
    "+recipe=deepswe", "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2", "harness.max_turns=1",
    "harness.reference.sub_agent=false", "harness.progress=false", "tracking.backends=[jsonl]", "trainer.total_steps=3",
]


def launch(run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gyre.main", *SMALL, f"run_dir={run_dir}", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "RAY_AUTH_MODE": "disabled"})


@pytest.mark.slow
def test_resume_after_killing_the_driver(tmp_path):
    run_dir = tmp_path / "run"
    first = launch(run_dir)
    latest = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + 400
    while not latest.exists():
        assert first.poll() is None, f"the driver exited early: {first.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint within 400 s"
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the driver and everything it started
    first.wait()
    saved = json.loads((latest.resolve() / "driver.json").read_text())
    assert saved["steps_done"] >= 1

    second = launch(run_dir, "trainer.resume=true")
    _, err = second.communicate(timeout=600)
    assert second.returncode == 0, err[-3000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # a step is checkpointed before it is logged, so no logged step is ever trained (or logged) twice
    assert steps == sorted(set(steps)) and steps[-1] == 3
    final = json.loads((latest.resolve() / "driver.json").read_text())
    assert final["steps_done"] == 3 and final["version"] == 3
