"""Parsers that turn test-runner output into per-test statuses or pass counts.

Each benchmark grades from the runner's text output, so each parser here follows its benchmark's rule:

- `parse_pytest`: SWE-bench / Terminal-Bench style. Reads both the ``-rA`` short summary
  (``PASSED tests/test_a.py::test_x``, ``FAILED tests/test_a.py::test_y - assert ...``) and verbose
  lines (``tests/test_a.py::test_x PASSED [ 50%]``); keys are full pytest node ids.
- `parse_r2e`: R2E-Gym's own parser (keys are the node id after the file, joined by dots), kept exact
  because ``expected_output_json`` was produced by it.
- `count_passed`: NL2RepoBench's ``(\\d+) passed`` count.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")
STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
PASSING = frozenset({"PASSED", "XFAIL"})  # SWE-bench counts an expected failure as a pass
_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*)$")
_VERBOSE = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s+\[\s*\d+%\])?\s*$")
_PASSED_COUNT = re.compile(r"(\d+) passed")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def parse_pytest(log: str) -> dict[str, str]:
    """Node id -> status from pytest output (``-rA`` summary and/or ``-v`` lines).

    A failed test's `` - message`` suffix is dropped. ``SKIPPED [1] file:line: reason`` lines carry no
    node id and are ignored. A test reported twice keeps its last status (the summary comes last).
    """
    statuses: dict[str, str] = {}
    for raw in strip_ansi(log).splitlines():
        line = raw.strip()
        match = _SUMMARY.match(line)
        if match:
            status, rest = match.groups()
            if status == "SKIPPED" and rest.startswith("["):
                continue
            test = rest.strip() if status == "PASSED" else rest.split(" - ", 1)[0].strip()
            if test:
                statuses[test] = status
            continue
        match = _VERBOSE.match(line)
        if match:
            statuses[match.group(1).strip()] = match.group(2)
    return statuses


def parse_r2e(log: str) -> dict[str, str]:
    """R2E-Gym's ``parse_log_pytest``: statuses from the text after "short test summary info"."""
    log = strip_ansi(log)
    if "short test summary info" not in log:
        return {}
    statuses: dict[str, str] = {}
    for line in log.split("short test summary info")[1].strip().split("\n"):
        if "PASSED" in line:
            statuses[".".join(line.split("::")[1:])] = "PASSED"
        elif "FAILED" in line:
            statuses[".".join(line.split("::")[1:]).split(" - ")[0]] = "FAILED"
        elif "ERROR" in line:
            name = ".".join(line.split("::")[1:]) or line
            statuses[name.split(" - ")[0]] = "ERROR"
    return statuses


def r2e_match(parsed: dict[str, str], expected: dict[str, str]) -> tuple[bool, list[str]]:
    """R2E-Gym's rule: the parsed map equals the expected one (keys without `` - ...`` suffixes).

    Returns (match, sorted list of keys that differ).
    """
    parsed_n = {strip_ansi(k).split(" - ")[0]: v for k, v in parsed.items()}
    expected_n = {strip_ansi(k).split(" - ")[0]: v for k, v in expected.items()}
    differing = sorted(k for k in set(parsed_n) | set(expected_n) if parsed_n.get(k) != expected_n.get(k))
    return not differing, differing


def count_passed(log: str) -> int:
    """The number in pytest's final ``N passed`` line (the last match), 0 when there is none.

    Taking the last match of one command's output, not the sum of all matches, keeps a test that
    prints "3 passed" from inflating the count; callers sum over commands.
    """
    found = _PASSED_COUNT.findall(strip_ansi(log))
    return int(found[-1]) if found else 0


def pytest_started(log: str) -> bool:
    """True when pytest ran far enough to print its session header or a result summary."""
    text = strip_ansi(log)
    return "test session starts" in text or bool(
        re.search(r"\b(passed|failed|error|errors|no tests ran)\b in [\d.]+s", text)
    )
