"""NL2RepoBench scoring of a from-scratch repository.

As the benchmark does: delete the agent's packaging and test files (so its own tests, configuration or
conftest cannot stand in for the hidden suite), copy the hidden test files in at the paths
``test_files.json`` names, run each command of ``test_commands.json``, count the tests that passed, and
score ``min(passed / test_case_count, 1)``.

Where the benchmark adds up the ``N passed`` lines of the output, Gyre counts the tests its guarded pytest
reported passed (`gyre.envs.scorers.guard`) whose file is one of the hidden test files, each node id once:
a printed summary line, a fake ``pytest.py``, an extra test file or a conftest hook earns nothing. Planted
test infrastructure anywhere in the workspace is removed too (`gyre.envs.scorers.infra`).

One adaptation: the sandbox has no network and the Python in use is read-only, so ``pip install ...``
commands are skipped (recorded in the detail) and ``PYTHONPATH`` holds the workspace and its ``src/``.
"""

from __future__ import annotations

import fnmatch
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gyre.envs.errors import EvaluationError
from gyre.envs.sandbox import Sandbox
from gyre.envs.scorers.base import LOG_TAIL_CHARS, run_guarded_tests, runner_missing
from gyre.envs.scorers.guard import TestReport
from gyre.envs.scorers.infra import neutralise
from gyre.envs.task import Score
from gyre.envs.workspace import place_tree, remove_path

if TYPE_CHECKING:
    from gyre.envs.task import Task

# Packaging, configuration and test scaffolding the agent may have written at the top of the workspace.
AGENT_FILES = (
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "pytest.ini",
    "tox.ini",
    "conftest.py",
    "poetry.lock",
    "MANIFEST.in",
    "environment.yml",
    "conda-env.yaml",
    "requirements*.txt",
    "Pipfile*",
)
AGENT_TEST_DIRS = ("tests", "test")
_INSTALL = re.compile(r"^\s*(?:python3?\s+-m\s+)?pip3?\s+install\b")


def is_install_command(command: str) -> bool:
    return bool(_INSTALL.match(command))


@dataclass(frozen=True)
class NL2RepoScorer:
    test_files: tuple[str, ...]
    test_commands: tuple[str, ...]
    test_case_count: int
    hidden_root: str  # host folder holding the hidden files at the paths of test_files
    skip_install: bool = True
    env: dict[str, str] = field(default_factory=dict)

    def install_tests(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        for entry in sorted(p.name for p in workspace.iterdir()):
            if entry in AGENT_TEST_DIRS or any(fnmatch.fnmatch(entry, pattern) for pattern in AGENT_FILES):
                remove_path(workspace, entry)
        for rel in self.test_files:
            remove_path(workspace, rel.rstrip("/"))
        neutralise(workspace, test_paths=self.test_files)
        root = Path(self.hidden_root)
        for rel in self.test_files:
            source = root / rel
            if not source.exists():
                raise EvaluationError(task.id, "setup", f"hidden test file {source} is missing")
            place_tree(workspace, rel.rstrip("/"), source)

    def sealed_paths(self) -> list[str]:
        return [rel.rstrip("/") for rel in self.test_files]

    def run(self, task: Task, workspace: Path, sandbox: Sandbox) -> Score:
        inner = sandbox.inner_workspace(workspace, task.workdir)
        env = {"PYTHONPATH": f"{inner}:{inner}/src", **self.env}
        hidden = [f"{inner}/{rel}" for rel in self.sealed_paths()]
        deadline = time.monotonic() + task.test_timeout
        per_command: list[dict[str, object]] = []
        report = TestReport()
        tails: list[str] = []
        for command in self.test_commands:
            if self.skip_install and is_install_command(command):
                per_command.append({"command": command, "skipped": "install commands need the network"})
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EvaluationError(task.id, "timeout", f"test commands ran past {task.test_timeout:.0f}s")
            result, ran = run_guarded_tests(task, sandbox, command, workspace, env=env, timeout=remaining)
            if runner_missing(result) and not ran.sessions:
                raise EvaluationError(task.id, "crash", f"test runner missing: {command}", result.tail(LOG_TAIL_CHARS))
            report.merge(ran)
            per_command.append(
                {"command": command, "passed": _passed(ran, hidden), "returncode": result.returncode,
                 "truncated": result.truncated, "pytest": ran.summary()}
            )
            tails.append(result.tail(LOG_TAIL_CHARS))
        passed = _passed(report, hidden)
        reward = min(passed / self.test_case_count, 1.0)
        detail = {
            "rule": "nl2repo: min(passed / test_case_count, 1); passed = hidden tests reported passed",
            "test_case_count": self.test_case_count,
            "commands": per_command,
            "ignored_results": len(report.results) - len(report.under(hidden)),
        }
        return Score(reward, passed, self.test_case_count, detail, "\n".join(tails)[-LOG_TAIL_CHARS:])


def _passed(report: TestReport, hidden: list[str]) -> int:
    """Tests of the hidden files the guarded runs reported passed, each node id once."""
    return sum(outcome.status == "PASSED" for outcome in report.under(hidden).values())
