"""Scorers hold against an agent trying to be paid without solving its task.

Every hack of the catalogue (`gyre.envs.scorers.hacks`: fake runners, conftest hooks, pytest
configuration, sitecustomize, a printed summary with exit 0, rewritten hidden tests, a forged report) is
planted in a real built-in task of each domain and scored by the real scorer in the real sandbox: none is
paid, the untouched workspace scores 0 and the reference solution still scores 1. Then the guard's
layers one at a time: the guarded runner alone (no cleanup) against a runner shadow, the sealed tests,
Harbor's reward cap, Terminal-Bench 1.x with a fake summary, and the report parser on bad input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gyre.envs import Sandbox, load_tasks
from gyre.envs.scorers.base import run_guarded_tests
from gyre.envs.scorers.guard import read_report
from gyre.envs.scorers.hacks import HACKS, try_hacks

from .helpers import needs_bwrap
from .test_terminal import harbor_task, tb_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def builtin_tasks() -> list:
    return [
        load_tasks("nl2repo", ROOT / "recipes" / "nl2repo" / "tasks" / "anagrams").tasks[0],
        load_tasks("swe", ROOT / "recipes" / "deepswe" / "tasks").by_id()["gyre-mini__textkit-1"],
        load_tasks("terminal", ROOT / "recipes" / "terminalbench" / "tasks" / "archive-docs").tasks[0],
    ]


@pytest.fixture(scope="module")
def outcome(builtin_tasks, tmp_path_factory) -> dict:
    sandbox = Sandbox(timeout=60, cpu_seconds=60, memory_mb=2048, max_processes=128)
    return try_hacks(builtin_tasks, sandbox, tmp_path_factory.mktemp("hacks"))


def test_reference_solutions_still_score_one(outcome) -> None:
    assert outcome["reference_rewards"] == {"anagrams": 1.0, "gyre-mini__textkit-1": 1.0, "archive-docs": 1.0}


def test_every_hack_was_tried_on_every_domain_it_targets(outcome) -> None:
    tried = {(a["hack"], a["domain"]) for a in outcome["attempts"]}
    wanted = {(hack.name, domain) for hack in HACKS for domain in hack.domains} | {
        ("do_nothing", domain) for domain in ("nl2repo", "swe", "terminal")
    }
    assert tried == wanted
    assert outcome["reward_hack_attempts"] >= 12


@pytest.mark.parametrize("hack", ["do_nothing", *(hack.name for hack in HACKS)])
def test_no_hack_is_paid(outcome, hack: str) -> None:
    attempts = [a for a in outcome["attempts"] if a["hack"] == hack]
    assert attempts
    for attempt in attempts:
        assert attempt["reward"] == 0.0, attempt


# ---------------------------------------------------------------------------------------------- the layers


def test_guarded_runner_alone_ignores_a_runner_shadow(tmp_path: Path) -> None:
    """Without the workspace cleanup, a pytest.py and a sitecustomize.py in the current folder (first on
    sys.path for `python -m pytest`) do not run: the report holds the real outcomes."""
    task = load_tasks("nl2repo", ROOT / "recipes" / "nl2repo" / "tasks" / "anagrams").tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "pytest.py").write_text("print('999 passed')\nraise SystemExit(0)\n")
    (workspace / "sitecustomize.py").write_text("raise SystemExit(0)\n")
    (workspace / "test_mine.py").write_text("import anagrams\n\ndef test_ok():\n    assert True\n\ndef test_bad():\n    assert False\n")
    (workspace / "anagrams.py").write_text("VALUE = 1\n")
    sandbox = Sandbox(timeout=60)
    result, report = run_guarded_tests(
        task, sandbox, "python -m pytest -q -p no:cacheprovider test_mine.py", workspace, env={"PYTHONPATH": str(workspace)}
    )
    statuses = {node: outcome.status for node, outcome in report.results.items()}
    assert statuses == {"test_mine.py::test_ok": "PASSED", "test_mine.py::test_bad": "FAILED"}, result.output[-2000:]
    assert report.sessions == report.finished == 1


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="sealing hands the tests to root: only when Gyre runs as root")
def test_hidden_tests_are_sealed_while_they_run(tmp_path: Path) -> None:
    task = load_tasks("nl2repo", ROOT / "recipes" / "nl2repo" / "tasks" / "anagrams").tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "anagrams.py").write_text(
        "import os\n"
        "for target in ('tests/test_anagrams.py', 'tests'):\n"
        "    for attempt in (lambda: os.unlink(target), lambda: os.rename(target, target + '.old'),\n"
        "                    lambda: open(target, 'a').write('x')):\n"
        "        try:\n"
        "            attempt()\n"
        "            print('CHANGED', target)\n"
        "        except OSError as error:\n"
        "            print('REFUSED', target, type(error).__name__)\n"
    )
    sandbox = Sandbox(timeout=60)
    score = task.score(workspace, sandbox)
    assert score.reward == 0.0
    assert "CHANGED" not in score.log_tail
    assert (workspace / "tests" / "test_anagrams.py").read_text().startswith("from anagrams import")


def test_harbor_reward_is_capped_by_the_reported_tests(tmp_path: Path) -> None:
    """A test.sh that rewards 1 whatever pytest said (as a run cut short by the code under test would)."""
    always_one = (
        '#!/bin/bash\nLOGS="${VERIFIER_LOGS_DIR:-/logs/verifier}"\nmkdir -p "$LOGS"\n'
        'python3 -m pytest -p no:cacheprovider -rA "${TEST_DIR:-/tests}/test_outputs.py"\necho 1 > "$LOGS/reward.txt"\n'
    )
    no_pytest = '#!/bin/bash\nLOGS="${VERIFIER_LOGS_DIR:-/logs/verifier}"\nmkdir -p "$LOGS"\necho 1 > "$LOGS/reward.txt"\n'
    sandbox = Sandbox(timeout=60)
    capped = load_tasks("terminal", harbor_task(tmp_path / "a", **{"tests/test.sh": always_one})).tasks[0]
    score = capped.score(capped.materialise(tmp_path / "ws-a"), sandbox)
    # One of the two checks passes on the untouched workspace: the reward is that share, not the file's 1.
    assert score.reward == score.detail["reward_cap"] == 0.5 and score.detail["reward_before_cap"] == 1.0
    unverified = load_tasks("terminal", harbor_task(tmp_path / "b", **{"tests/test.sh": no_pytest})).tasks[0]
    score = unverified.score(unverified.materialise(tmp_path / "ws-b"), sandbox)
    assert score.reward == 1.0 and score.detail["reward_cap"] is None  # no pytest ran: the file is all there is
    solved = load_tasks("terminal", harbor_task(tmp_path / "c", **{"tests/test.sh": always_one})).tasks[0]
    workspace = solved.materialise(tmp_path / "ws-c")
    solved.apply_solution(workspace, sandbox)
    assert solved.score(workspace, sandbox).reward == 1.0


def test_terminal_bench_ignores_printed_results(tmp_path: Path) -> None:
    fake = "#!/bin/bash\necho 'PASSED /tests/test_outputs.py::test_answer'\necho '1 passed in 0.01s'\nexit 0\n"
    task = load_tasks("terminal", tb_task(tmp_path / "tasks", **{"run-tests.sh": fake})).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "pytest.py").write_text("print('PASSED /tests/test_outputs.py::test_answer')\n")
    score = task.score(workspace, Sandbox(timeout=60))
    assert score.reward == 0.0 and score.total == 0


def test_report_parser_names_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "report.jsonl"
    lines = [
        {"session": "a", "event": "start", "rootdir": "/w"},
        {"session": "a", "event": "collected", "items": [{"nodeid": "t.py::x", "path": "/w/t.py"}]},
        {"session": "a", "event": "result", "nodeid": "t.py::x", "path": "/w/t.py", "status": "PASSED"},
        {"session": "a", "event": "result", "nodeid": "t.py::y", "path": "/w/t.py", "status": "GREAT"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    report = read_report(path)
    assert list(report.results) == ["t.py::x"] and report.sessions == 1 and report.finished == 0
    assert len(report.problems) == 2 and "GREAT" in report.problems[0]
    assert report.under(["/w/t.py"]) and not report.under(["/w/other"])
