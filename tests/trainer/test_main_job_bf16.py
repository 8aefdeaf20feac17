"""The main job with ``model.dtype=bfloat16`` (the GPU recipe's setting) on CPU: bf16 compute on float32
master weights in one-rank cells; the checkpoint is a bfloat16 HF folder with the float32 master weights
beside it in trainer_state.pt, and a resumed run continues from those."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch


@pytest.mark.slow
def test_a_bf16_run_checkpoints_bf16_and_resumes_from_its_master_weights(tmp_path):
    from safetensors import safe_open

    run_dir = tmp_path / "run"
    common = [sys.executable, "-m", "gyre.main", "+recipe=terminalbench", "model.dtype=bfloat16", f"run_dir={run_dir}",
              "cluster.cells=2", "scheduler.batch_size=4", "trainer.group_size=2", "harness.max_turns=1",
              "harness.reference.sub_agent=false", "harness.progress=false", "tracking.backends=[jsonl]"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    first = subprocess.run([*common, "trainer.total_steps=1"], capture_output=True, text=True, check=False, timeout=600, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    folder = run_dir / "checkpoints" / "step_000001"
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        assert {weights.get_slice(name).get_dtype() for name in weights.keys()}  # noqa: SIM118 - safe_open is no dict == {"BF16"}
    master = torch.load(folder / "trainer_state.pt", weights_only=False)["master_weights"]
    assert {t.dtype for t in master.values()} == {torch.float32}
    second = subprocess.run([*common, "trainer.total_steps=2", "trainer.resume=true"], capture_output=True, text=True, check=False,
                            timeout=600, env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(s["step"], s["version"]) for s in steps] == [(1, 1), (2, 2)]
