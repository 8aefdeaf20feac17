"""NL2RepoBench loader and scorer on small task folders in the public layout, and the bad-input cases."""

from __future__ import annotations

import json
from pathlib import Path

from gyre.envs import Sandbox, load_tasks
from gyre.envs.scorers.nl2repo import is_install_command

REFERENCE = "def double(x):\n    return 2 * x\n\n\ndef half(x):\n    return x / 2\n"
TESTS = (
    "from mini import double, half\n\n\n"
    "def test_double():\n    assert double(2) == 4\n\n\n"
    "def test_double_neg():\n    assert double(-1) == -2\n\n\n"
    "def test_half():\n    assert half(3) == 1.5\n\n\n"
    "def test_half_zero():\n    assert half(0) == 0\n"
)
COMMAND = (
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -p no:cacheprovider --continue-on-collection-errors -rA tests"
)


def make_task(root: Path, name: str = "mini", **overrides: str) -> Path:
    folder = root / name
    files = {
        "start.md": "# mini\n\nWrite `mini.py` with `double(x)` and `half(x)`.\n",
        "test_case_count.txt": "4\n",
        "test_commands.json": json.dumps(["pip install -e .", COMMAND]),
        "test_files.json": json.dumps(["tests/test_mini.py"]),
        "hidden/tests/test_mini.py": TESTS,
        "reference/mini.py": REFERENCE,
        **overrides,
    }
    for rel, text in files.items():
        if text is None:
            continue
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_loads_folder_of_tasks_and_reports_broken_ones(tmp_path: Path) -> None:
    make_task(tmp_path, "good")
    make_task(tmp_path, "bad-json", **{"test_commands.json": '["pytest", '})
    make_task(tmp_path, "wrong-type", **{"test_files.json": json.dumps({"tests": True})})
    make_task(tmp_path, "wrong-item", **{"test_commands.json": json.dumps(["pytest", 3])})
    make_task(tmp_path, "bad-count", **{"test_case_count.txt": "many"})
    make_task(tmp_path, "zero-count", **{"test_case_count.txt": "0"})
    missing = make_task(tmp_path, "missing-count")
    (missing / "test_case_count.txt").unlink()
    make_task(tmp_path, "missing-hidden", **{"test_files.json": json.dumps(["tests/test_other.py"])})
    make_task(tmp_path, "escape", **{"test_files.json": json.dumps(["../outside.py"])})
    result = load_tasks("nl2repo", tmp_path)
    assert [t.id for t in result.tasks] == ["good"]
    found = {Path(e.path).parent.name: (Path(e.path).name, e.field) for e in result.errors}
    assert found == {
        "bad-json": ("test_commands.json", "test_commands"),
        "wrong-type": ("test_files.json", "test_files"),
        "wrong-item": ("test_commands.json", "test_commands[1]"),
        "bad-count": ("test_case_count.txt", "test_case_count"),
        "zero-count": ("test_case_count.txt", "test_case_count"),
        "missing-count": ("test_case_count.txt", "test_case_count.txt"),
        "missing-hidden": ("test_files.json", "test_files"),
        "escape": ("test_files.json", "test_files"),
    }
    for error in result.errors:
        assert error.path in str(error) and repr(error.field) in str(error)


def test_single_task_folder(tmp_path: Path) -> None:
    task = load_tasks("nl2repo", make_task(tmp_path)).tasks[0]
    assert task.id == "mini" and task.instruction.startswith("# mini")
    assert task.domain == "nl2repo"


def test_reference_full_empty_zero(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("nl2repo", make_task(tmp_path / "tasks")).tasks[0]
    empty = task.materialise(tmp_path / "empty")
    assert list(empty.iterdir()) == []  # the agent starts from nothing and sees no tests
    score = task.score(empty, sandbox)
    assert (score.reward, score.passed, score.total) == (0.0, 0, 4)
    solved = task.materialise(tmp_path / "solved")
    task.apply_solution(solved, sandbox)
    score = task.score(solved, sandbox)
    assert (score.reward, score.passed) == (1.0, 4), score.log_tail
    assert score.detail["commands"][0]["skipped"]


def test_partial_credit(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("nl2repo", make_task(tmp_path / "tasks")).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "mini.py").write_text("def double(x):\n    return 2 * x\n\n\ndef half(x):\n    return 0\n")
    score = task.score(workspace, sandbox)
    assert (score.reward, score.passed, score.total) == (0.75, 3, 4)


def test_agent_scaffolding_removed_and_cannot_rig_results(tmp_path: Path, sandbox: Sandbox) -> None:
    """A conftest that marks every test passed, the agent's own tests and packaging all go away."""
    task = load_tasks("nl2repo", make_task(tmp_path / "tasks")).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
    )
    (workspace / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_extra.py").write_text("def test_free():\n    pass\n")
    score = task.score(workspace, sandbox)
    assert score.passed == 0 and score.reward == 0.0
    assert not (workspace / "conftest.py").exists() and not (workspace / "pyproject.toml").exists()
    assert sorted(p.name for p in (workspace / "tests").iterdir() if p.suffix == ".py") == ["test_mini.py"]


def test_planted_symlink_not_followed(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("nl2repo", make_task(tmp_path / "tasks")).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    victim = tmp_path / "victim"
    victim.mkdir()
    (workspace / "tests").symlink_to(victim)
    task.score(workspace, sandbox)
    assert list(victim.iterdir()) == []


def test_sums_over_commands(tmp_path: Path, sandbox: Sandbox) -> None:
    commands = json.dumps([COMMAND + "/test_mini.py::test_double", COMMAND + "/test_mini.py::test_half"])
    task = load_tasks("nl2repo", make_task(tmp_path / "tasks", **{"test_commands.json": commands})).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    task.apply_solution(workspace, sandbox)
    score = task.score(workspace, sandbox)
    assert (score.passed, score.reward) == (2, 0.5)


def test_install_command_detection() -> None:
    assert is_install_command("pip install -e .")
    assert is_install_command("python -m pip install -r requirements.txt")
    assert not is_install_command("pytest tests")


def test_score_capped_at_one(tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("nl2repo", make_task(tmp_path / "tasks", **{"test_case_count.txt": "2"})).tasks[0]
    workspace = task.materialise(tmp_path / "ws")
    task.apply_solution(workspace, sandbox)
    score = task.score(workspace, sandbox)
    assert score.reward == 1.0 and score.passed == 4
