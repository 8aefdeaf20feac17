"""How executions end when things go wrong, with real subprocesses in the real sandbox.

- a harness that crashes is ``crashed`` and still scored on its workspace (partial credit);
- a harness that ignores SIGTERM is SIGKILLed after the grace period; one that runs too long is stopped;
  cancelling a pool stops its harnesses; nothing is left running;
- an evaluation that itself fails is retried ``eval_retries`` times, then the execution is unscorable;
- tests that hang on every try score 0 (the agent's code hangs), not unscorable;
- a workspace that cannot be made is ``crashed`` and unscorable; a missing workspace scores 0.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from gyre.envs import load_tasks
from gyre.harness import (
    ExecutionPool,
    ExecutionRunner,
    HarnessConfig,
    is_scorable,
    make_runner,
)
from gyre.harness.harnesses import Command, LaunchContext
from gyre.harness.scoring import score_workspace

ROOT = Path(__file__).resolve().parents[2]
NL2REPO = ROOT / "recipes" / "nl2repo" / "tasks"
BANK_REFERENCE = NL2REPO / "bank" / "reference" / "bank.py"


def write_partial_bank(workspace: Path) -> None:
    shutil.copy(BANK_REFERENCE, workspace / "bank.py")
    with (workspace / "bank.py").open("a") as handle:
        handle.write("\n\ndef transfer(source, target, amount):\n    raise NotImplementedError\n")


@dataclass
class ShellHarness:
    """A harness that is just a bash script: real process, real sandbox, no model."""

    script: str
    name: str = "shell"
    uses_model: bool = False

    def command(self, ctx: LaunchContext) -> Command:
        return Command(["bash", "-c", self.script])

    def status(self, returncode: int) -> str:
        return "finished" if returncode == 0 else "crashed"


def shell_runner(script: str, sandbox, run_dir: Path) -> ExecutionRunner:
    config = HarnessConfig.from_mapping({"execution": {"grace_s": 1.0, "poll_s": 0.05}})
    config.execution.run_dir = str(run_dir)
    return ExecutionRunner(ShellHarness(script), sandbox, config)


def run_one(runner: ExecutionRunner, task, **submit):
    async def main():
        async with ExecutionPool(runner, concurrency=2, progress=False) as pool:
            return await pool.submit(task, **submit)

    return asyncio.run(main())


def bank(tmp_path: Path, **loader):
    """A private copy of the nl2repo ``bank`` task (so a test may break it)."""
    folder = tmp_path / "suite" / "bank"
    shutil.copytree(NL2REPO / "bank", folder)
    (task,) = load_tasks("nl2repo", folder, **loader).tasks
    return task, folder


def test_crashing_harness_is_crashed_and_still_scored(sandbox, tmp_path, no_leftover_processes) -> None:
    task, _ = bank(tmp_path)
    runner = shell_runner("echo starting; exit 1", sandbox, tmp_path / "runs")
    execution = run_one(runner, task, prepare=write_partial_bank)
    detail = execution.reward_detail
    assert execution.status == "crashed" and detail["returncode"] == 1 and detail["stop_reason"] == "exited"
    assert is_scorable(execution) and 0 < detail["passed"] < detail["total"], detail
    assert 0.0 < execution.reward < 1.0
    assert "starting" in Path(detail["log"]).read_text()


def test_stubborn_harness_is_killed_after_the_grace_period(sandbox, tmp_path, no_leftover_processes) -> None:
    task, _ = bank(tmp_path)
    runner = shell_runner("trap '' TERM; while true; do sleep 0.1; done", sandbox, tmp_path / "runs")
    execution = run_one(runner, task, time_limit_s=1.0, prepare=write_partial_bank)
    detail = execution.reward_detail
    assert execution.status == "timeout" and detail["stop_reason"] == "time_limit" and detail["killed"], detail
    assert 1.0 <= detail["harness_s"] < 10.0
    assert is_scorable(execution) and detail["passed"] > 0


def test_cancelled_pool_stops_its_harnesses(sandbox, tmp_path, no_leftover_processes) -> None:
    task, _ = bank(tmp_path)
    runner = shell_runner("sleep 120", sandbox, tmp_path / "runs")

    async def main() -> bool:
        pool = ExecutionPool(runner, concurrency=2, progress=False)
        futures = [pool.submit(task, sample_index=i) for i in range(2)]
        await asyncio.sleep(1.5)
        await pool.close()
        return all(future.cancelled() for future in futures)

    assert asyncio.run(main())


def test_failing_evaluation_is_retried_then_unscorable(sandbox, tmp_path, no_leftover_processes) -> None:
    task, folder = bank(tmp_path)
    shutil.rmtree(folder / "hidden")  # the hidden tests vanish after loading: installing them fails
    runner = make_runner(HarnessConfig(name="oracle"), sandbox=sandbox, run_dir=tmp_path / "runs", eval_retries=2)
    execution = run_one(runner, task)
    detail = execution.reward_detail
    assert execution.status == "finished"  # the harness did its job; the evaluation is what failed
    assert not is_scorable(execution) and detail["unscorable"] and detail["note"] == "unscorable"
    assert detail["eval_attempts"] == 3 and len(detail["eval_errors"]) == 3
    assert "hidden test file" in detail["eval_errors"][0]
    assert execution.reward == 0.0


def test_tests_hanging_on_every_try_score_zero(sandbox, tmp_path) -> None:
    task, _ = bank(tmp_path, test_timeout=0.01)
    runner = make_runner(HarnessConfig(name="oracle"), sandbox=sandbox, run_dir=tmp_path / "runs", eval_retries=1)
    execution = run_one(runner, task)
    detail = execution.reward_detail
    assert is_scorable(execution) and detail["note"] == "hung_tests" and detail["eval_attempts"] == 2, detail
    assert execution.reward == 0.0


def test_workspace_that_cannot_be_made_is_crashed_and_unscorable(sandbox, tmp_path) -> None:
    rows = (ROOT / "recipes" / "deepswe" / "tasks" / "instances.jsonl").read_text().splitlines()
    suite = tmp_path / "swe"
    (suite / "repos").mkdir(parents=True)
    row = json.loads(rows[0])
    tarball = f"{row['instance_id']}.tar.gz"
    shutil.copy(ROOT / "recipes" / "deepswe" / "tasks" / "repos" / tarball, suite / "repos" / tarball)
    (suite / "instances.jsonl").write_text(rows[0] + "\n")
    (task,) = load_tasks("swe", suite).tasks
    (suite / "repos" / tarball).unlink()  # gone after loading
    runner = make_runner(HarnessConfig(name="oracle"), sandbox=sandbox, run_dir=tmp_path / "runs")
    execution = run_one(runner, task)
    assert execution.status == "crashed" and not is_scorable(execution)
    assert execution.reward_detail["note"] == "setup_failed" and "workspace setup" in execution.reward_detail["error"]


def test_missing_workspace_is_nothing_to_evaluate(sandbox, tmp_path) -> None:
    task, _ = bank(tmp_path)
    outcome = score_workspace(task, tmp_path / "gone", sandbox, retries=2)
    assert outcome.scorable and outcome.reward == 0.0 and outcome.note == "nothing_to_evaluate"
