"""SWE loader and scorers on small fixtures in the public formats (SWE-bench rows with a bundled
tarball or a local git mirror, R2E-Gym rows), and the bad-input cases."""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from gyre.envs import EvaluationError, Sandbox, load_tasks
from gyre.envs.scorers.swe import SweScorer

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("a - b", "a + b")
TESTS = "from calc.ops import add, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
NEW_TESTS = TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_CMD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -rA -p no:cacheprovider"
FILES = {"calc/__init__.py": "", "calc/ops.py": BUGGY, "tests/test_ops.py": TESTS}


def diff(path: str, before: str, after: str) -> str:
    body = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


def write_tarball(path: Path, files: dict[str, str], top: str = "calc-base/") -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(top + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw.getvalue())


def git(folder: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    # safe.directory: a workspace the sandbox's unprivileged user worked in is that user's; the test trusts it
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=folder, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_mirror(root: Path) -> str:
    """A mirror of acme/calc whose history goes past the base commit (the fix is a later commit)."""
    repo = root / "mirror" / "acme" / "calc"
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "calc" / "ops.py").write_text(FIXED)
    git(repo, "commit", "-q", "-am", "the future fix")
    return base


def swe_row(instance_id: str, repo: str = "acme/calc", base: str = "0" * 40) -> dict[str, object]:
    return {
        "repo": repo,
        "instance_id": instance_id,
        "base_commit": base,
        "patch": diff("calc/ops.py", BUGGY, FIXED),
        "test_patch": diff("tests/test_ops.py", TESTS, NEW_TESTS),
        "problem_statement": "add() subtracts",
        "hints_text": "",
        "version": "1.0",
        "environment_setup_commit": base,
        "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_add"]),
        "PASS_TO_PASS": ["tests/test_ops.py::test_mul"],
        "test_cmd": TEST_CMD,
    }


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_tarball(root / "repos" / "acme__calc-1.tar.gz", FILES)
    base = make_mirror(root)
    r2e_tests = root / "repos" / "r2e-calc.r2e_tests"
    r2e_tests.mkdir(parents=True)
    (r2e_tests / "test_r2e.py").write_text(
        "from calc.ops import add, mul\n\n\nclass TestOps:\n    def test_add(self):\n        assert add(1, 1) == 2\n\n"
        "    def test_mul(self):\n        assert mul(2, 2) == 4\n"
    )
    write_tarball(root / "repos" / "r2e-calc.tar.gz", FILES)
    rows = [
        json.dumps(swe_row("acme__calc-1")),
        json.dumps(swe_row("acme__calc-2", base=base)),  # no tarball: comes from the mirror
        "{not json",
        json.dumps({k: v for k, v in swe_row("acme__calc-3").items() if k != "base_commit"}),
        json.dumps({**swe_row("acme__calc-4"), "FAIL_TO_PASS": 5}),
        json.dumps(swe_row("other__repo-5", repo="other/repo")),
        json.dumps(
            {
                "instance_id": "r2e-calc",
                "repo_name": "calc",
                "docker_image": "namanjain12/calc:abc",
                "problem_statement": "add() subtracts",
                "expected_output_json": json.dumps({"TestOps.test_add": "PASSED", "TestOps.test_mul": "PASSED"}),
                "patch": diff("calc/ops.py", BUGGY, FIXED),
                "test_cmd": TEST_CMD,
            }
        ),
    ]
    (root / "instances.jsonl").write_text("\n".join(rows) + "\n")
    return root


def test_loader_collects_errors_and_goes_on(dataset: Path) -> None:
    result = load_tasks("swe", dataset)
    assert sorted(t.id for t in result.tasks) == ["acme__calc-1", "acme__calc-2", "r2e-calc"]
    errors = {(e.path, e.field) for e in result.errors}
    file = str(dataset / "instances.jsonl")
    assert errors == {
        (f"{file}:3", "<row>"),
        (f"{file}:4", "base_commit"),
        (f"{file}:5", "FAIL_TO_PASS"),
        (f"{file}:6", "repo"),
    }
    for error in result.errors:  # the message itself names the file and the field
        assert file in str(error) and error.field in str(error)
    assert "other/repo" in str(next(e for e in result.errors if e.field == "repo"))


def test_json_encoded_and_list_fields(dataset: Path) -> None:
    task = load_tasks("swe", dataset).by_id()["acme__calc-1"]
    assert isinstance(task.scorer, SweScorer)
    assert task.scorer.fail_to_pass == ("tests/test_ops.py::test_add",)
    assert task.scorer.pass_to_pass == ("tests/test_ops.py::test_mul",)
    assert task.scorer.test_files == ("tests/test_ops.py",)
    assert task.instruction == "add() subtracts"


@pytest.mark.parametrize("instance", ["acme__calc-1", "acme__calc-2", "r2e-calc"])
def test_reference_scores_one_and_base_scores_zero(
    dataset: Path, tmp_path: Path, sandbox: Sandbox, instance: str
) -> None:
    task = load_tasks("swe", dataset).by_id()[instance]
    base = task.materialise(tmp_path / "base")
    score = task.score(base, sandbox)
    assert score.reward == 0.0
    assert score.passed == 1 and score.total == 2
    solved = task.materialise(tmp_path / "solved")
    task.apply_solution(solved, sandbox)
    score = task.score(solved, sandbox)
    assert score.reward == 1.0 and score.passed == score.total == 2, score.log_tail


def test_mirror_history_does_not_leak(dataset: Path, tmp_path: Path) -> None:
    task = load_tasks("swe", dataset).by_id()["acme__calc-2"]
    workspace = task.materialise(tmp_path / "ws")
    assert (workspace / "calc" / "ops.py").read_text() == BUGGY
    assert git(workspace, "log", "--all", "--oneline").count("\n") == 0  # one commit, no future fix
    assert "a + b" not in git(workspace, "log", "--all", "-p")


def test_tampered_tests_are_restored(dataset: Path, tmp_path: Path, sandbox: Sandbox) -> None:
    """An agent that rewrites the test file to pass still fails: the test patch's files are reset."""
    task = load_tasks("swe", dataset).by_id()["acme__calc-1"]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "tests" / "test_ops.py").write_text("def test_add():\n    pass\n\n\ndef test_mul():\n    pass\n")
    score = task.score(workspace, sandbox)
    assert score.reward == 0.0
    assert score.detail["FAIL_TO_PASS"] == {"tests/test_ops.py::test_add": "FAILED"}
    # scoring twice (a retry) must give the same answer: install_tests is idempotent
    assert task.score(workspace, sandbox).reward == 0.0


def test_agent_diff_is_visible_with_git(dataset: Path, tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("swe", dataset).by_id()["acme__calc-1"]
    workspace = task.materialise(tmp_path / "ws")
    task.apply_solution(workspace, sandbox)
    assert "+    return a + b" in git(workspace, "diff")


def test_hanging_tests_raise_timeout(dataset: Path, tmp_path: Path, sandbox: Sandbox) -> None:
    task = dataclasses.replace(load_tasks("swe", dataset).by_id()["acme__calc-1"], test_timeout=2.0)
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "calc" / "ops.py").write_text("while True:\n    pass\n")
    with pytest.raises(EvaluationError) as info:
        task.score(workspace, sandbox)
    assert info.value.reason == "timeout"


def test_missing_runner_is_a_crash(dataset: Path, tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("swe", dataset).by_id()["acme__calc-1"]
    task = dataclasses.replace(task, scorer=dataclasses.replace(task.scorer, test_cmd="no-such-test-runner"))
    workspace = task.materialise(tmp_path / "ws")
    with pytest.raises(EvaluationError) as info:
        task.score(workspace, sandbox)
    assert info.value.reason == "crash"


def test_broken_code_is_a_zero_not_a_crash(dataset: Path, tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("swe", dataset).by_id()["acme__calc-1"]
    workspace = task.materialise(tmp_path / "ws")
    (workspace / "calc" / "ops.py").write_text("this is not python\n")
    score = task.score(workspace, sandbox)
    assert score.reward == 0.0 and score.passed == 0


def test_unapplicable_test_patch_is_a_setup_error(dataset: Path, tmp_path: Path, sandbox: Sandbox) -> None:
    task = load_tasks("swe", dataset).by_id()["acme__calc-1"]
    broken = diff("tests/test_ops.py", "something else entirely\n", "x\n")
    task = dataclasses.replace(task, scorer=dataclasses.replace(task.scorer, test_patch=broken))
    workspace = task.materialise(tmp_path / "ws")
    with pytest.raises(EvaluationError) as info:
        task.score(workspace, sandbox)
    assert info.value.reason == "setup"


def test_rows_from_json_list_and_bad_files(tmp_path: Path) -> None:
    write_tarball(tmp_path / "repos" / "acme__calc-1.tar.gz", FILES)
    (tmp_path / "rows.json").write_text(json.dumps([swe_row("acme__calc-1"), "not an object"]))
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    result = load_tasks("swe", tmp_path)
    assert [t.id for t in result.tasks] == ["acme__calc-1"]
    fields = sorted((Path(e.path.split("[")[0]).name, e.field) for e in result.errors)
    assert fields == [("broken.parquet", "<file>"), ("rows.json", "<row>")]


def test_empty_fail_to_pass_rejected(tmp_path: Path) -> None:
    write_tarball(tmp_path / "repos" / "x-1.tar.gz", FILES)
    (tmp_path / "rows.jsonl").write_text(json.dumps({**swe_row("x-1"), "FAIL_TO_PASS": "[]"}) + "\n")
    result = load_tasks("swe", tmp_path)
    assert not result.tasks and result.errors[0].field == "FAIL_TO_PASS"


def test_duplicate_ids_reported(tmp_path: Path) -> None:
    write_tarball(tmp_path / "repos" / "x-1.tar.gz", FILES)
    (tmp_path / "rows.jsonl").write_text(json.dumps(swe_row("x-1")) + "\n" + json.dumps(swe_row("x-1")) + "\n")
    result = load_tasks("swe", tmp_path)
    assert len(result.tasks) == 1 and [e.field for e in result.errors] == ["id"]


def test_unknown_domain() -> None:
    with pytest.raises(ValueError, match="domain"):
        load_tasks("chess", ".")
