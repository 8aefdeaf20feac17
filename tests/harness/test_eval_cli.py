"""``python -m gyre.eval`` as users run it (a subprocess, Hydra and all): with the oracle (no model)
and with the tiny model behind the real serving stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_eval(*overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gyre.eval", *overrides], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_eval_oracle_on_a_recipe(tmp_path) -> None:
    done = run_eval("+recipe=nl2repo", "harness.name=oracle", "eval.limit=2", "eval.samples=2", f"run_dir={tmp_path}")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["harness"] == "oracle" and report["model"] is None and report["choices"]["env"] == "nl2repo"
    summary = report["summary"]["domains"]["nl2repo"]
    assert summary["tasks"] == 2 and summary["executions"] == 4 and summary["samples"] == 2
    assert summary["pass@1"] == summary["pass@k"] == summary["mean_partial"] == 1.0
    assert summary["timeouts"] == summary["crashes"] == summary["unscorable"] == 0
    assert "nl2repo" in done.stdout and "pass@1" in done.stdout  # the printed table


def test_eval_tiny_model_through_the_serving_stack(tmp_path) -> None:
    done = run_eval(
        "eval.limit=1", "eval.torch_threads=1", "harness.max_turns=1", "harness.max_tokens=8",
        "harness.reference.sub_agent=false", f"eval.output={tmp_path}/out/report.json", f"run_dir={tmp_path}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["model"] == "tiny" and report["harness"] == "reference"
    (row,) = report["executions"]
    assert row["domain"] == "swe" and row["status"] == "finished" and row["calls"] >= 1 and not row["unscorable"]
    assert report["summary"]["all"]["pass@1"] == 0.0  # random weights solve nothing
    records = list((tmp_path / "proxy" / "records").glob("*.jsonl"))
    assert [p.stem for p in records] == [row["id"]]  # every call of the execution was recorded by the proxy
