"""Output parsers, Score/Task validation, and the workspace helpers that touch agent folders."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from gyre.envs import Score, Task
from gyre.envs.testlog import count_passed, parse_pytest, parse_r2e, pytest_started, r2e_match
from gyre.envs.workspace import (
    EmptySource,
    extract_tar,
    patch_paths,
    place_file,
    place_tree,
    read_tar_member,
    remove_path,
)

PYTEST_LOG = """\
============================= test session starts ==============================
tests/test_a.py::test_ok PASSED                                          [ 20%]
tests/test_a.py::test_param[x y] PASSED                                  [ 40%]
=========================== short test summary info ============================
PASSED tests/test_a.py::test_ok
PASSED tests/test_a.py::test_param[x y]
PASSED tests/test_a.py::TestC::test_m
SKIPPED [1] tests/test_a.py:4: nope
XFAIL tests/test_a.py::test_xf - reason
XPASS tests/test_a.py::test_xp - reason
ERROR tests/test_a.py::test_e - RuntimeError: e
FAILED tests/test_a.py::test_f - AssertionError: boom - x
==== 1 failed, 4 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 error in 0.04s =====
"""


def test_parse_pytest() -> None:
    statuses = parse_pytest(PYTEST_LOG)
    assert statuses == {
        "tests/test_a.py::test_ok": "PASSED",
        "tests/test_a.py::test_param[x y]": "PASSED",
        "tests/test_a.py::TestC::test_m": "PASSED",
        "tests/test_a.py::test_xf": "XFAIL",
        "tests/test_a.py::test_xp": "XPASS",
        "tests/test_a.py::test_e": "ERROR",
        "tests/test_a.py::test_f": "FAILED",
    }


def test_parse_pytest_strips_colour() -> None:
    assert parse_pytest("\x1b[32mPASSED\x1b[0m t.py::test_a\n") == {"t.py::test_a": "PASSED"}


def test_parse_r2e_matches_upstream_keys() -> None:
    parsed = parse_r2e(PYTEST_LOG)
    assert parsed["test_ok"] == "PASSED" and parsed["TestC.test_m"] == "PASSED"
    assert parsed["test_f"] == "FAILED" and parsed["test_e"] == "ERROR"
    assert "test_xf" not in parsed  # upstream ignores XFAIL/XPASS lines
    assert parse_r2e("no summary here") == {}


def test_r2e_match() -> None:
    assert r2e_match({"a": "PASSED", "b - x": "FAILED"}, {"a": "PASSED", "b": "FAILED"}) == (True, [])
    assert r2e_match({"a": "PASSED"}, {"a": "PASSED", "b": "PASSED"}) == (False, ["b"])


def test_count_passed_takes_last_summary() -> None:
    assert count_passed("print: 3 passed earlier\n=== 2 failed, 7 passed in 0.1s ===") == 7
    assert count_passed("nothing") == 0
    assert pytest_started(PYTEST_LOG) and not pytest_started("bash: pytest: command not found")


def test_score_validation() -> None:
    score = Score(0.5, 1, 2)
    assert score.fraction == 0.5 and not score.resolved
    with pytest.raises(ValueError):
        Score(1.5, 1, 1)
    with pytest.raises(ValueError):
        Score(0.0, -1, 1)


def test_task_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="domain"):
        Task("t", "chess", "play", EmptySource(), scorer=None, agent_timeout=1, test_timeout=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="test_timeout"):
        Task("t", "swe", "fix", EmptySource(), scorer=None, agent_timeout=1, test_timeout=0)  # type: ignore[arg-type]
    task = Task("t", "nl2repo", "write", EmptySource(), scorer=None, agent_timeout=1, test_timeout=1)  # type: ignore[arg-type]
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    with pytest.raises(FileExistsError):
        task.materialise(tmp_path / "busy")
    assert task.materialise(tmp_path / "fresh").is_dir()
    with pytest.raises(ValueError, match="no reference solution"):
        task.apply_solution(tmp_path / "fresh", sandbox=None)  # type: ignore[arg-type]


def test_place_file_does_not_follow_symlinks(tmp_path: Path) -> None:
    workspace, victim = tmp_path / "ws", tmp_path / "victim"
    workspace.mkdir()
    victim.mkdir()
    (workspace / "tests").symlink_to(victim)  # an agent plants tests -> somewhere outside
    (workspace / "file.txt").symlink_to(victim / "target.txt")
    place_file(workspace, "tests/test_x.py", b"hidden")
    place_file(workspace, "file.txt", b"data")
    assert not (victim / "test_x.py").exists() and not (victim / "target.txt").exists()
    assert (workspace / "tests").is_dir() and not (workspace / "tests").is_symlink()
    assert (workspace / "tests" / "test_x.py").read_bytes() == b"hidden"
    assert (workspace / "file.txt").read_bytes() == b"data"


def test_remove_path_stays_inside(tmp_path: Path) -> None:
    workspace, victim = tmp_path / "ws", tmp_path / "victim"
    workspace.mkdir()
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    (workspace / "link").symlink_to(victim)
    assert not remove_path(workspace, "link/keep.txt")
    assert remove_path(workspace, "link")  # the symlink itself goes, not its target
    assert (victim / "keep.txt").exists()
    with pytest.raises(ValueError):
        remove_path(workspace, "../victim")
    with pytest.raises(ValueError):
        place_file(workspace, "/etc/x", b"")


def test_place_tree_copies_folder(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.py").write_text("a")
    (source / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(source / "run.sh", 0o755)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    place_tree(workspace, "dest", source)
    assert (workspace / "dest" / "sub" / "a.py").read_text() == "a"
    assert os.access(workspace / "dest" / "run.sh", os.X_OK)


def _tar(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def test_extract_tar_strips_single_top_folder(tmp_path: Path) -> None:
    data = _tar({"repo-abc/setup.py": b"s", "repo-abc/pkg/mod.py": b"m"})
    extract_tar(data, tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "mod.py").read_bytes() == b"m"
    (tmp_path / "t.tar.gz").write_bytes(data)
    assert read_tar_member(tmp_path / "t.tar.gz", "setup.py") == b"s"
    assert read_tar_member(tmp_path / "t.tar.gz", "absent.py") is None


def test_extract_tar_refuses_escapes(tmp_path: Path) -> None:
    with pytest.raises(tarfile.TarError):
        extract_tar(_tar({"../evil.txt": b"x", "ok.txt": b"y"}), tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()


def test_patch_paths() -> None:
    patch = (
        "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/tests/new.py b/tests/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/new.py\n"
    )
    assert patch_paths(patch) == ["src/a.py", "tests/new.py"]
