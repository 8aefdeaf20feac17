"""Test runs a scorer can trust, although the code under test was written by the policy being trained.

The scoring sandbox puts ``runtime/bin`` first on the test command's PATH, so ``python -m pytest``,
``python3 -m pytest`` and ``pytest`` run ``runtime/launch.py``: the real interpreter starts with ``-s -P``
and no PYTHONPATH, imports pytest and its plugins from the installed packages, and only then adds the
workspace to ``sys.path`` (so a ``pytest.py``, ``_pytest/``, ``sitecustomize.py`` or a stdlib-named module
in the workspace cannot stand in for the runner). Its report plugin writes each test's outcome by node id
to a file the command inherits as an open descriptor (`TestReport`): the file is in a root-only folder of
the host that is not mounted in the sandbox, and the descriptor's number leaves the environment before
anything of the workspace runs. Scorers read that, never a count printed on stdout or an exit code. Test
infrastructure the agent could plant in its workspace is reset before the run
(`gyre.envs.scorers.infra`), and the hidden tests are sealed so the code under test cannot rewrite them
(`gyre.envs.ownership.seal`).

What this cannot stop: code the tests import runs inside the pytest process, so it could patch pytest in
memory, or find the report's descriptor among the process's open files (programs a test command starts
inherit it too, as open files do) and write lines in the report's format to it. Both take a deliberate
attack on the runner's internals rather than a planted file; they are left to review of what the policy
learns (executions keep their workspaces with ``harness.execution.keep_workspaces``).

A command that runs pytest some other way (an absolute interpreter path, ``uv run``) writes no report and
scores nothing: task authors call ``python``/``python3``/``pytest`` from PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gyre.envs.sandbox import Mount, Sandbox, command_path

RUNTIME = Path(__file__).with_name("runtime")
RUNTIME_TARGET = "/gyre_scoring"
MAX_REPORT_BYTES = 64 << 20  # what is read of a run's report at most
STATUSES = frozenset({"PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"})


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest test class, though its name starts with "Test"
    nodeid: str
    path: str  # the test file as seen inside the sandbox
    status: str


@dataclass
class TestReport:
    """What the guarded pytest runs of one test command reported."""

    __test__ = False

    results: dict[str, TestOutcome] = field(default_factory=dict)  # by node id; a later run's status wins
    collected: dict[str, str] = field(default_factory=dict)  # node id -> path, every test collected
    sessions: int = 0  # pytest sessions that started
    finished: int = 0  # ... and ended normally
    problems: list[str] = field(default_factory=list)

    def under(self, roots: list[str]) -> dict[str, TestOutcome]:
        """Results of tests whose file is one of ``roots`` (files or folders, sandbox paths) or below one."""
        return {node: outcome for node, outcome in self.results.items() if _within(outcome.path, roots)}

    def collected_under(self, roots: list[str]) -> dict[str, str]:
        return {node: path for node, path in self.collected.items() if _within(path, roots)}

    def merge(self, other: TestReport) -> None:
        self.results.update(other.results)
        self.collected.update(other.collected)
        self.sessions += other.sessions
        self.finished += other.finished
        self.problems += other.problems

    def summary(self) -> dict[str, object]:
        return {"sessions": self.sessions, "finished": self.finished, "collected": len(self.collected),
                "results": len(self.results), "problems": self.problems[:5]}


def _within(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


class GuardedRun:
    """One test command's guard: the runtime mounted, PATH set, and the report file open for the command
    to inherit (a context manager: the report is removed on exit)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.folder = Path(tempfile.mkdtemp(prefix="gyre-scoring-report-"))  # 0700, root's: not the command's
        self.path = self.folder / "report.jsonl"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def __enter__(self) -> GuardedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def mounts(self) -> list[Mount]:
        return [Mount(str(RUNTIME), RUNTIME_TARGET)]

    def pass_fds(self) -> tuple[int, ...]:
        return (self.fd,)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        runtime = self.sandbox.visible_path(self.mounts()[0])
        env = dict(extra or {})
        env.update(
            PATH=f"{runtime}/bin{os.pathsep}{command_path()}",
            GYRE_SCORING_PYTHON=sys.executable,
            GYRE_PYTEST_REPORT_FD=str(self.fd),
            PYTHONDONTWRITEBYTECODE="1",
        )
        return env

    def read(self) -> TestReport:
        """What the command's pytest runs reported (once it has ended)."""
        self._close()
        return read_report(self.path)


def read_report(path: Path) -> TestReport:
    """Parse a report file (bounded: `MAX_REPORT_BYTES`). Lines carry their pytest session's id; a
    session's lines are read in order, and a later session's result for a node id wins."""
    report = TestReport()
    with open(path, "rb") as handle:
        data = handle.read(MAX_REPORT_BYTES + 1)
    if len(data) > MAX_REPORT_BYTES:
        report.problems.append(f"the report exceeds {MAX_REPORT_BYTES} bytes: the rest is ignored")
        data = data[:MAX_REPORT_BYTES]
    _parse(data, path.name, report)
    return report


def _parse(data: bytes, name: str, report: TestReport) -> None:
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            line = json.loads(raw)
            event = line["event"]
            if event == "start":
                report.sessions += 1
            elif event == "finish":
                report.finished += 1
            elif event == "collected":
                for item in line["items"]:
                    report.collected[str(item["nodeid"])] = str(item["path"])
            elif event == "result":
                if line["status"] not in STATUSES:
                    raise ValueError(f"unknown status {line['status']!r}")
                report.results[str(line["nodeid"])] = TestOutcome(str(line["nodeid"]), str(line["path"]), line["status"])
        except (ValueError, KeyError, TypeError) as error:
            report.problems.append(f"{name}:{number}: {type(error).__name__}: {error}"[:200])
