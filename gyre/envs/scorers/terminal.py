"""Terminal-Bench scoring: the 1.x layout (``run-tests.sh`` + ``tests/``, parsed pytest results) and the
Harbor layout (``tests/test.sh`` writing a reward file).

Hidden tests are staged per run into a fresh folder outside the workspace and shown to the command
read-only at ``/tests`` (bwrap; its host path under the process sandbox), with ``TEST_DIR`` pointing at
it, as Terminal-Bench does. Staging per run keeps scorers stateless, so one task can be scored for many
samples at once. Test commands run under the guarded pytest (`gyre.envs.scorers.guard`), and test-runner
stand-ins at the top of the workspace (``pytest.py``, ``sitecustomize.py``, ...) are removed first
(`gyre.envs.scorers.infra`).

Terminal-Bench 1.x resolves a task only if the guarded pytest reported at least one test of ``/tests``
and every one of them passed: a run that reported nothing is a failure, never a pass.

Harbor: the reward is read from ``/logs/verifier/reward.txt`` (a number) or, failing that,
``reward.json`` (``{"reward": x}``, or the mean of its numbers), as Harbor does. The folder is shown at
``/logs/verifier`` (bwrap) and named by ``VERIFIER_LOGS_DIR`` for scripts that must also run under the
process sandbox. No reward file means reward 0. The file is written by ``test.sh`` from an outcome the
code under test can reach (an exit code, a process that outlives pytest), so when pytest ran the reward
is capped by the share of ``/tests``' tests it reported passed (``reward_cap`` in the detail).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyre.envs.errors import EvaluationError
from gyre.envs.sandbox import Mount, Sandbox
from gyre.envs.scorers.base import LOG_TAIL_CHARS, run_guarded_tests, runner_missing, stage_folder
from gyre.envs.scorers.guard import TestReport
from gyre.envs.scorers.infra import neutralise
from gyre.envs.task import Score
from gyre.envs.testlog import PASSING
from gyre.envs.workspace import read_text_nofollow

if TYPE_CHECKING:
    from gyre.envs.task import Task

TESTS_TARGET = "/tests"
LOGS_TARGET = "/logs/verifier"


@dataclass(frozen=True)
class TerminalBenchScorer:
    run_tests_script: str
    tests_dir: str | None
    parser_name: str = "pytest"
    env: dict[str, str] = field(default_factory=dict)

    def install_tests(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        """The tests are staged outside the workspace for each run (see module note); only stand-ins for
        the runner are removed from it."""
        neutralise(workspace)

    def sealed_paths(self) -> list[str]:
        return []

    def run(self, task: Task, workspace: Path, sandbox: Sandbox) -> Score:
        tests = Path(self.tests_dir) if self.tests_dir else None
        staging = stage_folder(tests, {"run-tests.sh": Path(self.run_tests_script)})
        try:
            mount = Mount(str(staging), TESTS_TARGET)
            test_dir = sandbox.visible_path(mount)
            env = {"TEST_DIR": test_dir, **self.env}
            result, report = run_guarded_tests(
                task, sandbox, f"bash {test_dir}/run-tests.sh", workspace, env=env, mounts=[mount]
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        statuses = {node: outcome.status for node, outcome in report.under([test_dir]).items()}
        if not report.sessions and runner_missing(result):
            raise EvaluationError(
                task.id, "crash", "run-tests.sh could not start its runner", result.tail(LOG_TAIL_CHARS)
            )
        passed = sum(status in PASSING for status in statuses.values())
        resolved = bool(statuses) and passed == len(statuses)
        detail: dict[str, Any] = {
            "rule": "terminal-bench: at least one reported test and all reported tests passed",
            "tests": statuses,
            "returncode": result.returncode,
            "truncated": result.truncated,
            "limit": result.limit,
            "pytest": report.summary(),
        }
        if not statuses:
            detail["reason"] = "no reported test results (counted as a failure)"
        return Score(1.0 if resolved else 0.0, passed, len(statuses), detail, result.tail(LOG_TAIL_CHARS))


def read_reward(logs: Path) -> tuple[float | None, str]:
    """Harbor's reward: reward.txt first, then reward.json. Returns (value or None, how it was read)."""
    text = read_text_nofollow(logs / "reward.txt")
    if text is not None and text.strip():
        try:
            return float(text.strip().split()[0]), "reward.txt"
        except ValueError:
            return None, f"reward.txt is not a number: {text.strip()[:80]!r}"
    text = read_text_nofollow(logs / "reward.json")
    if text is not None and text.strip():
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"reward.json is not JSON: {exc}"
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data), "reward.json"
        if isinstance(data, dict):
            if isinstance(data.get("reward"), (int, float)):
                return float(data["reward"]), "reward.json[reward]"
            numbers = [float(v) for v in data.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if numbers:
                return sum(numbers) / len(numbers), "reward.json (mean of values)"
        return None, "reward.json holds no number"
    return None, "no reward file written"


@dataclass(frozen=True)
class HarborScorer:
    tests_dir: str
    env: dict[str, str] = field(default_factory=dict)

    def install_tests(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        """The tests are staged outside the workspace for each run (see module note); only stand-ins for
        the runner are removed from it."""
        neutralise(workspace)

    def sealed_paths(self) -> list[str]:
        return []

    def run(self, task: Task, workspace: Path, sandbox: Sandbox) -> Score:
        staging = stage_folder(Path(self.tests_dir))
        logs = Path(tempfile.mkdtemp(prefix="gyre-verifier-"))
        try:
            tests_mount = Mount(str(staging), TESTS_TARGET)
            logs_mount = Mount(str(logs), LOGS_TARGET, writable=True)
            test_dir = sandbox.visible_path(tests_mount)
            env = {"TEST_DIR": test_dir, "VERIFIER_LOGS_DIR": sandbox.visible_path(logs_mount), **self.env}
            result, report = run_guarded_tests(
                task, sandbox, f"bash {test_dir}/test.sh", workspace, env=env, mounts=[tests_mount, logs_mount]
            )
            value, source = read_reward(logs)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(logs, ignore_errors=True)
        statuses = {node: outcome.status for node, outcome in report.under([test_dir]).items()}
        if value is None and runner_missing(result):
            raise EvaluationError(task.id, "crash", "test.sh could not start its runner", result.tail(LOG_TAIL_CHARS))
        detail: dict[str, Any] = {
            "rule": "harbor: reward file written by tests/test.sh",
            "reward_source": source,
            "tests": statuses,
            "returncode": result.returncode,
            "truncated": result.truncated,
            "limit": result.limit,
        }
        reward = 0.0 if value is None else value
        if not 0.0 <= reward <= 1.0:
            detail["raw_reward"] = reward
            reward = min(max(reward, 0.0), 1.0)
        cap = reward_cap(report, test_dir)
        detail["pytest"] = report.summary()
        detail["reward_cap"] = cap
        if cap is not None and reward > cap:
            detail["reward_before_cap"] = reward
            reward = cap
        if statuses:
            passed, total = sum(s in PASSING for s in statuses.values()), len(statuses)
        else:
            passed, total = (1, 1) if reward >= 1.0 else (0, 1)
        return Score(reward, passed, total, detail, result.tail(LOG_TAIL_CHARS))


def reward_cap(report: TestReport, test_dir: str) -> float | None:
    """The share of ``/tests``' collected tests that the guarded pytest reported passed, or None when
    ``test.sh`` ran no pytest (its reward file is then all there is)."""
    if not report.sessions:
        return None
    collected = report.collected_under([test_dir])
    if not collected:
        return 0.0
    outcomes = report.under([test_dir])
    passed = sum(1 for node in collected if node in outcomes and outcomes[node].status in PASSING)
    return passed / len(collected)
