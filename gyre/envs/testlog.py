"""Test-runner output and status maps.

Scorers never grade from printed output (the code under test can print anything): they read the guarded
pytest's report (`gyre.envs.scorers.guard`). What is here serves trusted output and the shared rules:

- `parse_pytest`: statuses from pytest's ``-rA`` summary and verbose lines, for output Gyre itself
  produced (the built-in suites' generators check their reference solutions with it).
- `r2e_match`: R2E-Gym's rule (the status map equals ``expected_output_json``), over the keys
  `gyre.envs.scorers.swe.r2e_statuses` makes the way R2E-Gym's log parser does.
- `PASSING`: statuses SWE-bench counts as a pass.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")
STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
PASSING = frozenset({"PASSED", "XFAIL"})  # SWE-bench counts an expected failure as a pass
_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*)$")
_VERBOSE = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s+\[\s*\d+%\])?\s*$")


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


def r2e_match(parsed: dict[str, str], expected: dict[str, str]) -> tuple[bool, list[str]]:
    """R2E-Gym's rule: the parsed map equals the expected one (keys without `` - ...`` suffixes).

    Returns (match, sorted list of keys that differ).
    """
    parsed_n = {strip_ansi(k).split(" - ")[0]: v for k, v in parsed.items()}
    expected_n = {strip_ansi(k).split(" - ")[0]: v for k, v in expected.items()}
    differing = sorted(k for k in set(parsed_n) | set(expected_n) if parsed_n.get(k) != expected_n.get(k))
    return not differing, differing
