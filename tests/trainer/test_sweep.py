"""A Hydra sweep of the main job as the README writes it (``-m`` first), then ``gyre.compare`` on the sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_a_two_point_sweep_runs_in_named_folders_and_compares(tmp_path):
    overrides = [
        "-m", "+recipe=nl2repo", "trajectory.max_paths=1,5", "trainer.total_steps=1", "cluster.cells=2",
        "scheduler.batch_size=2", "trainer.group_size=2", "harness.max_turns=1", "harness.reference.sub_agent=false",
        "harness.progress=false", "tracking.backends=[jsonl]",
    ]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (sweep,) = (tmp_path / "runs").glob("sweep_*")
    points = sorted(p for p in sweep.iterdir() if p.is_dir())
    # Each point's folder carries its overrides in its name and holds its composed config and metrics.
    assert [("trajectory.max_paths=1" in p.name, "trajectory.max_paths=5" in p.name) for p in points] == [
        (True, False), (False, True)]
    for point in points:
        assert (point / ".hydra" / "config.yaml").is_file() and (point / ".hydra" / "overrides.yaml").is_file()
        rows = [json.loads(line) for line in (point / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [1]

    compared = subprocess.run([sys.executable, "-m", "gyre.compare", str(sweep)], capture_output=True, text=True,
                              timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert (sweep / "compare.png").stat().st_size > 10_000
    # The table labels each run by the override that differs between them.
    assert "trajectory.max_paths=1" in compared.stdout and "trajectory.max_paths=5" in compared.stdout
