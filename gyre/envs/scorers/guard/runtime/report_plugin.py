"""A pytest plugin, loaded by ``launch.py`` inside a scoring sandbox: it puts the code under test on
``sys.path`` only once pytest and its plugins are loaded, and writes each test's outcome to the report the
scorer reads (JSON lines on an inherited file descriptor, each tagged with this session's id, written as
tests end, so a run cut short keeps what it finished).

Lines: ``{"event": "start", "rootdir": ...}``, ``{"event": "collected", "items": [{"nodeid", "path"}]}``,
``{"event": "result", "nodeid", "path", "status"}`` (PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS) and
``{"event": "finish", "exitstatus": N}``. Standard library and pytest only.
"""

from __future__ import annotations

import json
import os
import secrets
import sys

import pytest


class GyreReport:
    def __init__(self, report_fd: int, import_paths: list[str]) -> None:
        self.fd = report_fd
        self.import_paths = import_paths
        self.session = secrets.token_hex(8)
        self.paths: dict[str, str] = {}
        self.status: dict[str, str] = {}

    def emit(self, **line: object) -> None:
        data = (json.dumps({"session": self.session, **line}) + "\n").encode()
        while data:  # the file is O_APPEND: one write per line keeps concurrent sessions' lines whole
            data = data[os.write(self.fd, data):]

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(self, early_config: pytest.Config) -> None:
        # The workspace joins sys.path only now: pytest, its plugins and what they import came from the
        # installed packages, so files the agent left cannot stand in for them.
        for path in reversed(self.import_paths):
            if path not in sys.path:
                sys.path.insert(0, path)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.emit(event="start", rootdir=str(session.config.rootpath))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.paths[item.nodeid] = str(item.path)
        self.emit(event="collected", items=[{"nodeid": n, "path": p} for n, p in self.paths.items()])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        xfail = hasattr(report, "wasxfail")
        if report.when == "setup":
            if report.failed:
                self.status[report.nodeid] = "ERROR"
            elif report.skipped:
                self.status[report.nodeid] = "XFAIL" if xfail else "SKIPPED"
        elif report.when == "call":
            if report.passed:
                self.status[report.nodeid] = "XPASS" if xfail else "PASSED"
            elif report.failed:
                self.status[report.nodeid] = "FAILED"
            else:
                self.status[report.nodeid] = "XFAIL" if xfail else "SKIPPED"
        elif report.when == "teardown" and report.failed:
            self.status[report.nodeid] = "ERROR"

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        status = self.status.pop(nodeid, "ERROR")
        self.emit(event="result", nodeid=nodeid, path=self.paths.get(nodeid, ""), status=status)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.emit(event="finish", exitstatus=int(exitstatus))
