"""The built-in mini suites: every task loads through the public-format loader, its reference solution
scores 1.0 through the real sandbox and scorer, and its untouched workspace scores below 1.

All tasks are evaluated once, in parallel (a small thread pool: each evaluation is a sandboxed
subprocess), by a module-scoped fixture; each task then gets its own test result.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gyre.envs import Sandbox, Score, Task, load_tasks

ROOT = Path(__file__).resolve().parents[2]
SUITES = {
    "swe": ROOT / "recipes" / "deepswe" / "tasks",
    "nl2repo": ROOT / "recipes" / "nl2repo" / "tasks",
    "terminal": ROOT / "recipes" / "terminalbench" / "tasks",
}
LOADED = {domain: load_tasks(domain, path) for domain, path in SUITES.items()}
TASKS: dict[str, Task] = {f"{d}:{t.id}": t for d, result in LOADED.items() for t in result.tasks}
WORKERS = 3


def evaluate(task: Task, sandbox: Sandbox) -> tuple[Score | Exception, Score | Exception]:
    """(score with the reference solution, score of the untouched workspace)."""
    outcome: list[Score | Exception] = []
    for solve in (True, False):
        root = Path(tempfile.mkdtemp(prefix="gyre-suite-"))
        try:
            workspace = task.materialise(root / "ws")
            if solve:
                task.apply_solution(workspace, sandbox)
            outcome.append(task.score(workspace, sandbox))
        except Exception as exc:  # noqa: BLE001 - any failure is reported per task below
            outcome.append(exc)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return outcome[0], outcome[1]


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[Score | Exception, Score | Exception]]:
    sandbox = Sandbox(timeout=120, cpu_seconds=120, memory_mb=2048, max_processes=128)
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {key: pool.submit(evaluate, task, sandbox) for key, task in TASKS.items()}
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("domain", sorted(SUITES))
def test_suite_loads_cleanly(domain: str) -> None:
    result = LOADED[domain]
    assert result.errors == []
    assert len(result.tasks) >= 30
    assert all(task.solution is not None for task in result.tasks)


def test_terminal_suite_has_both_layouts() -> None:
    formats = {task.meta["format"] for task in LOADED["terminal"].tasks}
    assert formats == {"terminal-bench-1", "harbor"}


def test_nl2repo_suite_sizes() -> None:
    for task in LOADED["nl2repo"].tasks:
        assert 5 <= task.scorer.test_case_count <= 30, task.id


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(TASKS))
def test_reference_solves_and_untouched_does_not(key: str, results: dict) -> None:
    solved, untouched = results[key]
    assert isinstance(solved, Score), f"reference solution failed: {solved!r}"
    assert solved.reward == 1.0, f"reference scored {solved.reward}: {solved.detail}\n{solved.log_tail}"
    assert isinstance(untouched, Score), f"untouched workspace could not be scored: {untouched!r}"
    assert untouched.reward < 1.0


def test_terminal_generator_is_deterministic(tmp_path: Path) -> None:
    """Regenerating the Terminal-Bench suite reproduces the committed files byte for byte."""
    out = tmp_path / "tasks"
    subprocess.run(
        [sys.executable, str(ROOT / "recipes" / "terminalbench" / "make_tasks.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    comparison = filecmp.dircmp(out, SUITES["terminal"])
    differing: list[str] = []

    def walk(node: filecmp.dircmp, prefix: str = "") -> None:
        differing.extend(prefix + name for name in node.left_only + node.right_only + node.diff_files)
        _, mismatch, errors = filecmp.cmpfiles(node.left, node.right, node.common_files, shallow=False)
        differing.extend(prefix + name for name in mismatch + errors)
        for name, sub in node.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(comparison)
    assert sorted(set(differing)) == []
