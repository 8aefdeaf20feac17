"""SWE loader: SWE-bench / SWE-Gym / SWE-smith rows and R2E-Gym rows, from local files only.

Rows (one per line of a .jsonl, or a .json list, or a .parquet via `datasets`):

- SWE-bench family: ``instance_id, repo, base_commit, problem_statement, test_patch, FAIL_TO_PASS,
  PASS_TO_PASS`` (the last two lists or JSON-encoded lists), optional ``patch`` (the gold fix, used as the
  reference solution) and ``test_cmd`` (the pytest command the test files are appended to).
- R2E-Gym: rows with ``expected_output_json`` (``repo_name, problem_statement, expected_output_json``,
  optional ``instance_id``, ``commit_hash``, ``docker_image``, ``patch``). Hidden tests come from the
  folder ``<repos>/<id>.r2e_tests/`` (the image's ``/r2e_tests``), an optional ``<repos>/<id>.run_tests.sh``
  runs them.

Repositories never come from the network: a bundled tarball ``<repos>/<id>.tar.gz`` (also ``.tgz``,
``.tar``) holding the repository at its base commit, or a git mirror folder per ``repo`` under
``mirror`` (``<mirror>/<owner>/<name>``, ``<mirror>/<owner>__<name>`` or ``<mirror>/<name>``) exported at
``base_commit``. When ``path`` is a folder its row files are read and ``repos``/``mirror`` default to
its ``repos/`` and ``mirror/`` subfolders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gyre.envs.errors import TaskFormatError
from gyre.envs.loaders.common import LoadResult, iter_rows, optional, require, row_files, string_list
from gyre.envs.scorers.swe import DEFAULT_TEST_CMD, R2EScorer, SweScorer
from gyre.envs.solutions import PatchSolution
from gyre.envs.task import Task
from gyre.envs.workspace import GitMirrorSource, TarballSource, patch_paths

TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar")
DEFAULT_AGENT_TIMEOUT = 5400.0  # DeepSWE's 90-minute execution limit
DEFAULT_TEST_TIMEOUT = 900.0


def safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "__", text).strip("_") or "task"


def load_swe(
    path: str | Path,
    *,
    repos: str | Path | None = None,
    mirror: str | Path | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    test_cmd: str = DEFAULT_TEST_CMD,
    env: dict[str, str] | None = None,
) -> LoadResult:
    """Load every row of ``path`` (a row file or a folder of them) into SWE tasks."""
    root = Path(path)
    result = LoadResult()
    if not root.exists():
        result.add_error(TaskFormatError(root, "<path>", "does not exist"))
        return result
    base = root if root.is_dir() else root.parent
    repos_dir = Path(repos) if repos is not None else base / "repos"
    mirror_dir = Path(mirror) if mirror is not None else base / "mirror"
    loader = _RowLoader(repos_dir, mirror_dir, agent_timeout, test_timeout, test_cmd, dict(env or {}))
    for file in row_files(root):
        try:
            rows = list(iter_rows(file))
        except TaskFormatError as exc:
            result.add_error(exc)
            continue
        for where, row in rows:
            if isinstance(row, TaskFormatError):
                result.add_error(row)
                continue
            try:
                result.tasks.append(loader.task(row, where))
            except TaskFormatError as exc:
                result.add_error(exc)
    result.check_unique()
    return result


class _RowLoader:
    def __init__(
        self, repos: Path, mirror: Path, agent_timeout: float, test_timeout: float, test_cmd: str, env: dict[str, str]
    ) -> None:
        self.repos, self.mirror = repos, mirror
        self.agent_timeout, self.test_timeout = agent_timeout, test_timeout
        self.test_cmd, self.env = test_cmd, env

    def task(self, row: dict[str, Any], where: str) -> Task:
        if "expected_output_json" in row:
            return self.r2e_task(row, where)
        return self.swe_task(row, where)

    def swe_task(self, row: dict[str, Any], where: str) -> Task:
        instance_id = require(row, "instance_id", str, where)
        repo = require(row, "repo", str, where)
        base_commit = require(row, "base_commit", str, where)
        statement = require(row, "problem_statement", str, where)
        test_patch = require(row, "test_patch", str, where)
        fail_to_pass = string_list(require(row, "FAIL_TO_PASS", (str, list), where), "FAIL_TO_PASS", where)
        pass_to_pass = string_list(optional(row, "PASS_TO_PASS", (str, list), where, []), "PASS_TO_PASS", where)
        if not fail_to_pass:
            raise TaskFormatError(where, "FAIL_TO_PASS", "is empty: nothing would tell a fix from no fix")
        patch = optional(row, "patch", str, where, "")
        test_cmd = optional(row, "test_cmd", str, where, self.test_cmd)
        source = self.source(instance_id, repo, base_commit, where, "repo")
        scorer = SweScorer(
            fail_to_pass=tuple(fail_to_pass),
            pass_to_pass=tuple(pass_to_pass),
            test_patch=test_patch,
            test_cmd=test_cmd,
            test_files=tuple(select_test_files(test_patch, fail_to_pass + pass_to_pass)),
            env=self.env,
        )
        return Task(
            id=instance_id,
            domain="swe",
            instruction=statement,
            source=source,
            scorer=scorer,
            agent_timeout=self.agent_timeout,
            test_timeout=self.test_timeout,
            solution=PatchSolution(patch) if patch.strip() else None,
            origin=where,
            meta={"repo": repo, "base_commit": base_commit, "format": "swe-bench"},
        )

    def r2e_task(self, row: dict[str, Any], where: str) -> Task:
        repo_name = require(row, "repo_name", str, where)
        statement = require(row, "problem_statement", str, where)
        raw_expected = require(row, "expected_output_json", (str, dict), where)
        if isinstance(raw_expected, str):
            try:
                expected = json.loads(raw_expected)
            except json.JSONDecodeError as exc:
                raise TaskFormatError(where, "expected_output_json", f"invalid JSON: {exc}") from exc
        else:
            expected = raw_expected
        if not isinstance(expected, dict) or not all(isinstance(v, str) for v in expected.values()) or not expected:
            raise TaskFormatError(where, "expected_output_json", "expected a non-empty object of test -> status")
        commit = optional(row, "commit_hash", str, where, "")
        instance_id = optional(row, "instance_id", str, where)
        if instance_id is None:
            tag = commit[:12] or optional(row, "docker_image", str, where, "")
            if not tag:
                raise TaskFormatError(
                    where, "instance_id", "missing, and no commit_hash or docker_image to name the task by"
                )
            instance_id = safe_id(f"{repo_name}__{tag}")
        tests_dir = self.repos / f"{instance_id}.r2e_tests"
        if not tests_dir.is_dir():
            raise TaskFormatError(where, "r2e_tests", f"hidden tests folder {tests_dir} not found")
        run_script = self.repos / f"{instance_id}.run_tests.sh"
        patch = optional(row, "patch", str, where, "")
        source = self.source(instance_id, repo_name, commit, where, "repo_name")
        scorer = R2EScorer(
            expected=dict(expected),
            tests_dir=str(tests_dir),
            run_script=str(run_script) if run_script.is_file() else None,
            test_cmd=optional(row, "test_cmd", str, where, self.test_cmd),
            env=self.env,
        )
        return Task(
            id=instance_id,
            domain="swe",
            instruction=statement,
            source=source,
            scorer=scorer,
            agent_timeout=self.agent_timeout,
            test_timeout=self.test_timeout,
            solution=PatchSolution(patch) if patch.strip() else None,
            origin=where,
            meta={"repo": repo_name, "base_commit": commit, "format": "r2e-gym"},
        )

    def source(
        self, instance_id: str, repo: str, commit: str, where: str, repo_field: str
    ) -> TarballSource | GitMirrorSource:
        for suffix in TARBALL_SUFFIXES:
            tarball = self.repos / f"{safe_id(instance_id)}{suffix}"
            if tarball.is_file():
                return TarballSource(str(tarball))
        owner, _, name = repo.rpartition("/")
        for candidate in (self.mirror / repo, self.mirror / f"{owner}__{name}", self.mirror / name):
            if (candidate / ".git").exists() or (candidate / "HEAD").is_file():
                if not commit:
                    raise TaskFormatError(where, "base_commit", f"needed to export mirror {candidate}")
                return GitMirrorSource(str(candidate), commit)
        raise TaskFormatError(
            where,
            repo_field,
            f"no tarball {safe_id(instance_id)}.tar.gz under {self.repos} and no git mirror for {repo!r} under "
            f"{self.mirror} (repositories must be local: there is no network)",
        )


def select_test_files(test_patch: str, test_ids: list[str]) -> list[str]:
    """Test files to run: the .py files the test patch touches, then files named in the test ids."""
    files = [p for p in patch_paths(test_patch) if p.endswith(".py")]
    for test in test_ids:
        file, sep, _ = test.partition("::")
        if sep and file.endswith(".py") and file not in files:
            files.append(file)
    return files
