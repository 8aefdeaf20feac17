"""The main job end to end under each scheduler: it trains, checkpoints, writes wandb offline files and
the cell-role timeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["elastic", "colocate", "async"])
def test_main_job_runs_under_each_scheduler(tmp_path, scheduler):
    run_dir = tmp_path / "run"
    overrides = [
        "+recipe=terminalbench", f"scheduler={scheduler}", f"run_dir={run_dir}", "trainer.total_steps=2",
        "cluster.cells=3", "scheduler.batch_size=4", "trainer.group_size=2", "scheduler.rollout_cells=1",
        "harness.max_turns=1", "harness.reference.sub_agent=false", "harness.progress=false",
        "tracking.backends=[jsonl,wandb]",
    ]
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True,
                          timeout=600, env={**env, "RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["scheduler"]["name"] == scheduler and s["version"] == s["step"] for s in steps)
    assert all(s["executions/trained"] >= 4 and s["tokens/tree"] > 0 for s in steps)
    for s in steps:  # each execution's wall time splits into model-call time and the rest (sim calibration)
        split = zip(s["rollout/execution_time_s"], s["rollout/model_time_s"], s["rollout/tool_time_s"], strict=True)
        assert all(model > 0 and abs(model + rest - wall) < 1e-6 for wall, model, rest in split), s
        assert len(s["rollout/execution_calls"]) == len(s["rollout/execution_time_s"])
    assert (run_dir / "timeline.png").stat().st_size > 1000
    latest = run_dir / "checkpoints" / "latest"
    assert os.readlink(latest) == "step_000002"
    # A checkpoint is an HF folder (servable and evaluable) with the trainer's state beside it.
    assert {"config.json", "model.safetensors", "tokenizer.json", "trainer_state.pt", "driver.json"} <= {p.name for p in latest.iterdir()}
    assert all(s["executions/no_calls"] == 0 for s in steps)
    assert list((run_dir / "wandb").glob("offline-run-*"))
    if scheduler == "async":  # the fixed split: the one rollout satellite never trains
        assert all(s["train/cells"] == 2 for s in steps)
