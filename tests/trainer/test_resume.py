"""Resuming a run: one wandb run, one timeline, the curves. (A driver killed mid-run and resumed, with no
step lost or repeated, is the kill part of ``benchmarks/reliability.py``, checked by its documented command
in tests/test_documented_commands.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SMALL = [
    "+recipe=deepswe", "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2", "harness.max_turns=1",
    "harness.reference.sub_agent=false", "harness.progress=false", "tracking.backends=[jsonl]", "trainer.total_steps=3",
]


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
