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
    assert "partial: tests passed / tests counted" in done.stdout  # and what its partial credit means
    progress = [line for line in done.stderr.splitlines() if "mean reward" in line]  # captured: not a terminal
    assert progress and all(line.startswith("oracle 4/4") and "…" not in line for line in progress), done.stderr


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


def test_eval_warns_once_about_a_broken_task_and_names_a_missing_suite(tmp_path) -> None:
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "recipes" / "nl2repo" / "tasks" / "anagrams", suite / "anagrams")
    (suite / "zz_broken").mkdir()  # no start.md: a broken task
    done = run_eval("+recipe=nl2repo", "harness.name=oracle", f"env.path={suite}", f"run_dir={tmp_path / 'run'}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout + done.stderr).count("zz_broken") == 1, done.stdout + done.stderr

    missing = run_eval("+recipe=nl2repo", "harness.name=oracle", f"env.path={tmp_path / 'no_suite'}",
                       f"run_dir={tmp_path / 'run2'}")
    assert missing.returncode != 0
    assert "does not exist" in missing.stderr + missing.stdout and "holds no loadable" not in missing.stderr
