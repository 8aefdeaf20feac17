"""Output parsers, Score/Task validation, and the workspace helpers that touch agent folders."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from gyre.envs import Score, Task
from gyre.envs.scorers.guard import TestOutcome, TestReport
from gyre.envs.scorers.swe import r2e_statuses
from gyre.envs.testlog import parse_pytest, r2e_match
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


def test_r2e_keys_match_upstream() -> None:
    """R2E-Gym's keys (the node id after the file, joined by dots) from a guarded run's report; like its log
    parser, XFAIL/XPASS/SKIPPED are left out, and only tests under the r2e_tests folder count."""
    statuses = {"test_ok": "PASSED", "TestC::test_m": "PASSED", "test_f": "FAILED", "test_e": "ERROR",
                "test_xf": "XFAIL", "test_s": "SKIPPED"}
    report = TestReport(results={f"r2e_tests/test_a.py::{name}": TestOutcome(f"r2e_tests/test_a.py::{name}",
                                                                              "/w/r2e_tests/test_a.py", status)
                                 for name, status in statuses.items()})
    report.results["mine.py::test_extra"] = TestOutcome("mine.py::test_extra", "/w/mine.py", "PASSED")
    parsed = r2e_statuses(report, "/w/r2e_tests")
    assert parsed == {"test_ok": "PASSED", "TestC.test_m": "PASSED", "test_f": "FAILED", "test_e": "ERROR"}


def test_r2e_match() -> None:
    assert r2e_match({"a": "PASSED", "b - x": "FAILED"}, {"a": "PASSED", "b": "FAILED"}) == (True, [])
    assert r2e_match({"a": "PASSED"}, {"a": "PASSED", "b": "PASSED"}) == (False, ["b"])


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
