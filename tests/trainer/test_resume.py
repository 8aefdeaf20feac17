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


@pytest.mark.slow
def test_resume_continues_the_wandb_run_the_timeline_and_the_curves(tmp_path):
    """1 step, then a resume to 2 steps: one wandb run id, a timeline of both sessions, curves.png after
    each part, and each metric under one name."""
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    common = [sys.executable, "-m", "gyre.main", *SMALL, f"run_dir={run_dir}", "tracking.backends=[jsonl,wandb]"]
    first = subprocess.run([*common, "trainer.total_steps=1"], capture_output=True, text=True, timeout=600,
                           env={**env, "RAY_AUTH_MODE": "disabled"})
    assert first.returncode == 0, first.stderr[-3000:]
    assert (run_dir / "curves.png").stat().st_size > 1000
    run_id = (run_dir / "wandb_id").read_text().strip()

    second = subprocess.run([*common, "trainer.total_steps=2", "trainer.resume=true"], capture_output=True,
                            text=True, timeout=600, env={**env, "RAY_AUTH_MODE": "disabled"})
    assert second.returncode == 0, second.stderr[-3000:]
    assert (run_dir / "wandb_id").read_text().strip() == run_id
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(f"-{run_id}" in folder.name for folder in offline)

    events = [json.loads(line) for line in (run_dir / "timeline.jsonl").read_text().splitlines()]
    assert {e["session"] for e in events if "cell" in e} == {0, 1}, "the roles before the resume are kept"
    assert {e["role"] for e in events if e.get("session") == 0 and "cell" in e} >= {"rollout", "train"}
    assert (run_dir / "timeline.png").stat().st_size > 1000 and (run_dir / "curves.png").stat().st_size > 1000

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:  # one name per metric: the namespaced one
        assert {"train/time_s", "train/weight_sync_s", "train/cells", "tokens/tree", "loss"} <= set(row)
        assert not {"pg_loss", "train_time_s", "weight_sync_s", "trainer_members", "tree_tokens"} & set(row)
