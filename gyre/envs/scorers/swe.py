"""SWE-bench-style and R2E-Gym scoring of a repository workspace.

SWE-bench rule: restore the files the test patch touches to their base version (the agent may have
edited them), apply the test patch, run the test files, and resolve only if every FAIL_TO_PASS and
PASS_TO_PASS test passes (PASSED or XFAIL). A test absent from the results counts as failed.

R2E-Gym rule: copy the hidden ``r2e_tests`` folder in, run them, and resolve only if the status map
equals ``expected_output_json`` exactly (keys as R2E-Gym's log parser makes them).

Both grade from the guarded pytest's report by node id (`gyre.envs.scorers.guard`), never from printed
output. Before the tests run, the files of every FAIL_TO_PASS/PASS_TO_PASS test are restored to their
base version as well (stricter than SWE-bench, which restores only the test patch's files: otherwise an
agent could rewrite a PASS_TO_PASS test to hide what it broke), and planted test infrastructure is reset
to the repository's own (`gyre.envs.scorers.infra`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gyre.envs.errors import EvaluationError
from gyre.envs.sandbox import Mount, Sandbox
from gyre.envs.scorers.base import LOG_TAIL_CHARS, apply_patch, run_guarded_tests, runner_missing
from gyre.envs.scorers.guard import TestReport
from gyre.envs.scorers.infra import neutralise
from gyre.envs.task import Score
from gyre.envs.testlog import PASSING, r2e_match
from gyre.envs.workspace import patch_paths, place_file, place_tree, remove_path

if TYPE_CHECKING:
    from gyre.envs.task import Task

DEFAULT_TEST_CMD = "python -m pytest -rA -p no:cacheprovider"


def lookup(statuses: dict[str, str], test_id: str) -> str:
    """Status of ``test_id``; ids without a file part (``test_foo``) match a unique ``...::test_foo``."""
    if test_id in statuses:
        return statuses[test_id]
    if "::" not in test_id:
        found = [status for node, status in statuses.items() if node.endswith("::" + test_id)]
        if len(found) == 1:
            return found[0]
    return "MISSING"


@dataclass(frozen=True)
class SweScorer:
    """FAIL_TO_PASS / PASS_TO_PASS grading. ``test_files`` are run (all tests when empty)."""

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_patch: str
    test_cmd: str = DEFAULT_TEST_CMD
    test_files: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def sealed_paths(self) -> list[str]:
        """The test patch's files and the files of every graded test."""
        named = [test.split("::", 1)[0] for test in (*self.fail_to_pass, *self.pass_to_pass) if "::" in test]
        return list(dict.fromkeys([*patch_paths(self.test_patch), *named]))

    def install_tests(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        original = getattr(task.source, "original", None)
        for rel in self.sealed_paths():
            content = original(rel) if original is not None else None
            if content is None:
                remove_path(workspace, rel)
            else:
                place_file(workspace, rel, content)
        neutralise(workspace, test_paths=self.sealed_paths(), original=original)
        if self.test_patch.strip():
            apply_patch(task, workspace, self.test_patch, sandbox, what="test patch")

    def run(self, task: Task, workspace: Path, sandbox: Sandbox) -> Score:
        command = " ".join([self.test_cmd, *(shlex.quote(f) for f in self.test_files)])
        result, report = run_guarded_tests(task, sandbox, command, workspace, env=self.env)
        statuses = {node: outcome.status for node, outcome in report.results.items()}
        if not report.sessions and runner_missing(result):
            raise EvaluationError(task.id, "crash", f"test runner missing: {command}", result.tail(LOG_TAIL_CHARS))
        f2p = {test: lookup(statuses, test) for test in self.fail_to_pass}
        p2p = {test: lookup(statuses, test) for test in self.pass_to_pass}
        wanted = {**p2p, **f2p}
        passed = sum(status in PASSING for status in wanted.values())
        resolved = bool(wanted) and passed == len(wanted)
        detail = {
            "rule": "swe-bench: all FAIL_TO_PASS and PASS_TO_PASS pass",
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": p2p,
            "returncode": result.returncode,
            "truncated": result.truncated,
            "limit": result.limit,
            "pytest": report.summary(),
        }
        if not statuses:
            detail["reason"] = "no test results reported"
        return Score(1.0 if resolved else 0.0, passed, len(wanted), detail, result.tail(LOG_TAIL_CHARS))


@dataclass(frozen=True)
class R2EScorer:
    """R2E-Gym grading: exact match of the parsed status map with ``expected``.

    ``tests_dir`` (host folder) is copied to ``r2e_tests/`` in the workspace; ``run_script`` (a
    ``run_tests.sh``) is run when given, else ``test_cmd r2e_tests``.
    """

    expected: dict[str, str]
    tests_dir: str
    run_script: str | None = None
    test_cmd: str = DEFAULT_TEST_CMD
    env: dict[str, str] = field(default_factory=dict)

    def sealed_paths(self) -> list[str]:
        return ["r2e_tests"]

    def install_tests(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        remove_path(workspace, "r2e_tests")
        hidden = [f"r2e_tests/{path.relative_to(self.tests_dir).as_posix()}" for path in Path(self.tests_dir).rglob("*")]
        neutralise(workspace, test_paths=hidden, original=getattr(task.source, "original", None))
        place_tree(workspace, "r2e_tests", Path(self.tests_dir))

    def run(self, task: Task, workspace: Path, sandbox: Sandbox) -> Score:
        mounts: list[Mount] = []
        if self.run_script:
            script_dir = str(Path(self.run_script).parent)
            mount = Mount(script_dir, "/gyre_r2e")
            mounts.append(mount)
            command = f"bash {sandbox.visible_path(mount)}/{Path(self.run_script).name}"
        else:
            command = f"{self.test_cmd} r2e_tests"
        result, report = run_guarded_tests(task, sandbox, command, workspace, env=self.env, mounts=mounts)
        tests_root = f"{sandbox.inner_workspace(workspace, task.workdir)}/r2e_tests"
        parsed = r2e_statuses(report, tests_root)
        if not report.sessions and runner_missing(result):
            raise EvaluationError(task.id, "crash", f"test runner missing: {command}", result.tail(LOG_TAIL_CHARS))
        match, differing = r2e_match(parsed, self.expected)
        passed = sum(parsed.get(name) == status for name, status in self.expected.items())
        detail = {
            "rule": "r2e-gym: parsed status map equals expected_output_json",
            "parsed": parsed,
            "differing": differing,
            "returncode": result.returncode,
            "truncated": result.truncated,
            "limit": result.limit,
            "pytest": report.summary(),
        }
        resolved = match and bool(self.expected)
        return Score(1.0 if resolved else 0.0, passed, len(self.expected), detail, result.tail(LOG_TAIL_CHARS))


R2E_STATUSES = ("PASSED", "FAILED", "ERROR")  # what R2E-Gym's parser reads; it skips the others


def r2e_statuses(report: TestReport, tests_root: str) -> dict[str, str]:
    """The status map R2E-Gym's ``parse_log_pytest`` makes (key: the node id after the file, joined by
    dots), from the reported results of the tests under ``tests_root``."""
    return {
        ".".join(node.split("::")[1:]): outcome.status
        for node, outcome in report.under([tests_root]).items()
        if outcome.status in R2E_STATUSES
    }
