"""Test runs a scorer can trust, although the code under test was written by the policy being trained.

The scoring sandbox puts ``runtime/bin`` first on the test command's PATH, so ``python -m pytest``,
``python3 -m pytest`` and ``pytest`` run ``runtime/launch.py``: the real interpreter starts with ``-s -P``
and no PYTHONPATH, imports pytest and its plugins from the installed packages, and only then adds the
workspace to ``sys.path`` (so a ``pytest.py``, ``_pytest/``, ``sitecustomize.py`` or a stdlib-named module
in the workspace cannot stand in for the runner). Its report plugin writes each test's outcome by node id
to a folder mounted for this run only (`TestReport`); scorers read that, never a count printed on stdout
or an exit code. Test infrastructure the agent could plant in its workspace is reset before the run
(`gyre.envs.scorers.infra`), and the hidden tests are sealed so the code under test cannot rewrite them
(`gyre.envs.ownership.seal`).

What this cannot stop: code the tests import runs inside the pytest process, so it could patch pytest
itself in memory. That takes a deliberate attack on pytest's internals rather than a planted file, and is
left to review of what the policy learns (the trained-on executions keep their workspaces on request).

A command that runs pytest some other way (an absolute interpreter path, ``uv run``) writes no report and
scores nothing: task authors call ``python``/``python3``/``pytest`` from PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gyre.envs.sandbox import Mount, Sandbox, command_path

RUNTIME = Path(__file__).with_name("runtime")
RUNTIME_TARGET = "/gyre_scoring"
REPORTS_TARGET = "/gyre_scoring_reports"
MAX_REPORT_BYTES = 64 << 20  # what is read of a run's reports at most (the code under test can write there)
STATUSES = frozenset({"PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"})


@dataclass
class TestOutcome:
    nodeid: str
    path: str  # the test file as seen inside the sandbox
    status: str


@dataclass
class TestReport:
    """What the guarded pytest runs of one test command reported."""

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
    """One test command's guard: the runtime and a fresh report folder mounted, PATH set (a context
    manager: the report folder is removed on exit)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.reports = Path(tempfile.mkdtemp(prefix="gyre-scoring-reports-"))
        owner = sandbox.runs_as()
        if owner is not None:
            os.chown(self.reports, *owner)

    def __enter__(self) -> GuardedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.reports, ignore_errors=True)

    def mounts(self) -> list[Mount]:
        return [Mount(str(RUNTIME), RUNTIME_TARGET), Mount(str(self.reports), REPORTS_TARGET, writable=True)]

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        runtime, reports = (self.sandbox.visible_path(mount) for mount in self.mounts())
        env = dict(extra or {})
        env.update(
            PATH=f"{runtime}/bin{os.pathsep}{command_path()}",
            GYRE_SCORING_PYTHON=sys.executable,
            GYRE_PYTEST_REPORT_DIR=reports,
            PYTHONDONTWRITEBYTECODE="1",
        )
        return env

    def read(self) -> TestReport:
        return read_reports(self.reports)


def read_reports(folder: Path) -> TestReport:
    """Parse every report file in ``folder`` (regular files only, never through a symlink, bounded)."""
    report = TestReport()
    budget = MAX_REPORT_BYTES
    for name in sorted(os.listdir(folder)):
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            report.problems.append(f"{name}: not a readable regular file")
            continue
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                report.problems.append(f"{name}: not a regular file")
                continue
            data = handle.read(budget + 1)
        if len(data) > budget:
            report.problems.append(f"reports exceed {MAX_REPORT_BYTES} bytes: the rest is ignored")
            data = data[:budget]
        budget -= len(data)
        _parse(data, name, report)
        if budget <= 0:
            break
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
