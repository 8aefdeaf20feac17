"""The learning recipe's machinery in a short run: the warm start is built once (demonstrations through the
proxy, SFT) and reused from the cache, held-out validation runs before the first step, every step and
after the last, and the curve is written."""

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
    """One training and one held-out task of each family."""
    for split in ("train", "heldout"):
        for family in ("write", "write2", "copy"):
            source = sorted((SUITE / split).glob(f"{split}-{family}-*"))[0]
            shutil.copytree(source, root / split / source.name)
    return root / "train", root / "heldout"


def run(run_dir: Path, cache: Path, train: Path, heldout: Path, steps: int) -> subprocess.CompletedProcess:
    overrides = [
        "+recipe=learn", f"run_dir={run_dir}", f"env.path={train}", f"env.val_path={heldout}", "model.path=tiny",
        "warm_start.demonstrations=1", "warm_start.sft.steps=4", "warm_start.sft.short_context_steps=2",
        "warm_start.sft.batch_executions=3", "warm_start.sft.warmup_steps=1", "warm_start.sft.save_every=4",
        f"trainer.total_steps={steps}", "trainer.val_every=1", "trainer.val_samples=1", "trainer.save_every=1",
        "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2", "harness.max_tokens=32",
        "harness.progress=false", "tracking.backends=[jsonl]",
    ]
    env = {**os.environ, "GYRE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.slow
def test_learning_recipe_validates_plots_and_reuses_its_warm_start(tmp_path):
    train, heldout = small_suite(tmp_path / "suite")
    cache = tmp_path / "cache"
    first = run(tmp_path / "run", cache, train, heldout, steps=2)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    validations = [row for row in rows if "val/pass_rate" in row]
    # one validation per step; each is logged when it ends, so two can be written out of step order
    assert sorted(row["val/step"] for row in validations) == [0, 1, 2]
    assert all(row["val/executions"] == 3 and 0.0 <= row["val/score"] <= 1.0 for row in validations)
    assert validations[0]["val/call_versions"] == [0]  # the "before" figure is the warm start's own
    assert (tmp_path / "run" / "val_curve.png").stat().st_size > 1000
    warm = json.loads((tmp_path / "run" / "warm_start.json").read_text())
    assert Path(warm["checkpoint"]).is_relative_to(cache) and (Path(warm["checkpoint"]) / "config.json").is_file()
    assert (tmp_path / "run" / "sft_loss.png").is_file() and (tmp_path / "run" / "demonstrations.json").is_file()
    demos = json.loads((tmp_path / "run" / "demonstrations.json").read_text())
    assert demos["executions"] == 3

    second = run(tmp_path / "again", cache, train, heldout, steps=1)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads((tmp_path / "again" / "warm_start.json").read_text())["checkpoint"] == warm["checkpoint"]
    assert "warm start: reusing" in second.stdout + second.stderr
