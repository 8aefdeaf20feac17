"""The learning recipe's machinery in a short run on its branching family: the warm start is built once
(demonstrations through the proxy, SFT) and reused from the cache, even by a greedy run; RL trains trees of
several paths; held-out validation runs before the first step, every step and after the last, scores every
execution it planned and says so, and the curve is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "recipes" / "learn" / "tasks"


def small_suite(root: Path) -> tuple[Path, Path]:
    """Two training tasks and one dev task of the branching family."""
    for split, count in (("train", 2), ("dev", 1)):
        for source in sorted((SUITE / split).glob(f"{split}-search-*"))[:count]:
            shutil.copytree(source, root / split / source.name)
    return root / "train", root / "dev"


def run(run_dir: Path, cache: Path, train: Path, dev: Path, steps: int, *extra: str) -> subprocess.CompletedProcess:
    overrides = [
        "+recipe=learn", f"run_dir={run_dir}", f"env.path={train}", f"env.val_path={dev}", "model.path=tiny",
        "warm_start.demonstrations=1", "warm_start.sft.steps=4", "warm_start.sft.short_context_steps=2",
        "warm_start.sft.batch_executions=2", "warm_start.sft.warmup_steps=1", "warm_start.sft.save_every=4",
        f"trainer.total_steps={steps}", "trainer.val_every=1", "trainer.val_samples=2", "trainer.save_every=1",
        "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2", "harness.progress=false",
        "tracking.backends=[jsonl]", *extra,
    ]
    env = {**os.environ, "GYRE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.slow
def test_learning_recipe_trains_branching_trees_validates_and_reuses_its_warm_start(tmp_path):
    train, dev = small_suite(tmp_path / "suite")
    cache = tmp_path / "cache"
    first = run(tmp_path / "run", cache, train, dev, 2)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if "reward/mean" in row]
    # RL trained trees of several paths (sub-agents, the summary, retries), their shared tokens once
    assert all(row["trees/paths_mean"] >= 2 and row["tokens/path"] > row["tokens/tree"] for row in steps), steps
    assert all(row["train/fwd_bwd_s"] > 0 for row in steps)
    validations = [row for row in rows if "val/pass_rate" in row]
    # one validation per step; each is logged when it ends, so two can be written out of step order
    assert sorted(row["val/step"] for row in validations) == [0, 1, 2]
    for row in validations:
        assert row["val/executions"] == row["val/planned"] == 2 and row["val/unscorable"] == 0
        low, high = row["val/pass_rate_ci"]
        assert 0.0 <= low <= row["val/pass_rate"] <= high <= 1.0 and len(row["val/rewards"]) == 2
        assert row["val/paths_mean"] >= 2
    assert validations[0]["val/call_versions"] == [0]  # the "before" figure is the warm start's own
    assert (tmp_path / "run" / "val_curve.png").stat().st_size > 1000
    warm = json.loads((tmp_path / "run" / "warm_start.json").read_text())
    assert Path(warm["checkpoint"]).is_relative_to(cache) and (Path(warm["checkpoint"]) / "config.json").is_file()
    assert (tmp_path / "run" / "sft_loss.png").is_file() and (tmp_path / "run" / "demonstrations.json").is_file()
    demos = json.loads((tmp_path / "run" / "demonstrations.json").read_text())
    assert demos["executions"] == 2

    # The greedy baseline: the same warm start (temperature does not change a scripted demonstration),
    # validated at temperature 0 without training: a task's two samples make the very same calls.
    greedy = run(tmp_path / "greedy", cache, train, dev, 0, "harness.temperature=0")
    assert greedy.returncode == 0, greedy.stderr[-3000:]
    assert json.loads((tmp_path / "greedy" / "warm_start.json").read_text())["checkpoint"] == warm["checkpoint"]
    assert "warm start: reusing" in greedy.stdout + greedy.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "greedy" / "metrics.jsonl").read_text().splitlines()
              if "val/pass_rate" in line]
    assert row["val/step"] == 0 and row["val/executions"] == 2
    samples = [[(c.get("agent"), c["response_ids"]) for c in map(json.loads, f.read_text().splitlines())]
               for f in sorted((tmp_path / "greedy" / "records").glob("dev-*.jsonl"))]
    assert len(samples) == 2 and samples[0] == samples[1]
