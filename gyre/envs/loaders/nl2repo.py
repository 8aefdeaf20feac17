"""NL2RepoBench loader: one folder per task.

Public files (as in the benchmark's ``test_files/<task>/``):
- ``start.md``: the specification, given to the agent as its instruction;
- ``test_case_count.txt``: the score's denominator (a positive integer);
- ``test_commands.json``: a list of shell commands that run the hidden tests;
- ``test_files.json``: a list of workspace-relative paths (files or folders) of the hidden tests.

The benchmark keeps the hidden test files in its Docker images; here they live in the task folder under
``hidden/`` at the paths ``test_files.json`` names (or under ``<tests_root>/<task>/`` when given). A
``reference/`` folder, when present, is the reference implementation (copied over the starting workspace
it must score 1.0). The agent starts from an empty workspace and sees neither.

One extension of the format: a ``workspace/`` folder, when present, holds the files the agent starts with
(NL2RepoBench itself always starts empty; Gyre's ``learn`` suite has tasks that read a given file).
"""

from __future__ import annotations

from pathlib import Path

from gyre.envs.errors import TaskFormatError
from gyre.envs.loaders.common import LoadResult, check_type, read_json_file
from gyre.envs.scorers.nl2repo import NL2RepoScorer
from gyre.envs.solutions import CopySolution
from gyre.envs.task import Task
from gyre.envs.workspace import CopySource, EmptySource, relative_parts

REQUIRED = ("start.md", "test_case_count.txt", "test_commands.json", "test_files.json")
DEFAULT_AGENT_TIMEOUT = 3600.0
DEFAULT_TEST_TIMEOUT = 600.0


def is_task_folder(path: Path) -> bool:
    return path.is_dir() and (path / "start.md").is_file()


def load_nl2repo(
    path: str | Path,
    *,
    tests_root: str | Path | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    skip_install: bool = True,
    env: dict[str, str] | None = None,
) -> LoadResult:
    """Load one task folder, or every task folder directly inside ``path``."""
    root = Path(path)
    result = LoadResult()
    if not root.is_dir():
        result.add_error(TaskFormatError(root, "<path>", "is not a folder"))
        return result
    folders = (
        [root]
        if is_task_folder(root)
        else sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    )
    for folder in folders:
        try:
            result.tasks.append(
                load_task(
                    folder,
                    tests_root=tests_root,
                    agent_timeout=agent_timeout,
                    test_timeout=test_timeout,
                    skip_install=skip_install,
                    env=env,
                )
            )
        except TaskFormatError as exc:
            result.add_error(exc)
    result.check_unique()
    return result


def load_task(
    folder: Path,
    *,
    tests_root: str | Path | None = None,
    agent_timeout: float = DEFAULT_AGENT_TIMEOUT,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    skip_install: bool = True,
    env: dict[str, str] | None = None,
) -> Task:
    for name in REQUIRED:
        if not (folder / name).is_file():
            raise TaskFormatError(folder / name, name, "file is missing")
    instruction = (folder / "start.md").read_text(encoding="utf-8")
    if not instruction.strip():
        raise TaskFormatError(folder / "start.md", "start.md", "is empty")
    count_text = (folder / "test_case_count.txt").read_text(encoding="utf-8").strip()
    try:
        count = int(count_text)
    except ValueError as exc:
        raise TaskFormatError(
            folder / "test_case_count.txt", "test_case_count", f"not an integer: {count_text[:40]!r}"
        ) from exc
    if count <= 0:
        raise TaskFormatError(folder / "test_case_count.txt", "test_case_count", f"must be > 0, got {count}")
    commands = _string_list(folder / "test_commands.json", "test_commands")
    files = _string_list(folder / "test_files.json", "test_files")
    if not commands:
        raise TaskFormatError(folder / "test_commands.json", "test_commands", "is empty")
    hidden = Path(tests_root) / folder.name if tests_root is not None else folder / "hidden"
    for rel in files:
        try:
            relative_parts(rel)
        except ValueError as exc:
            raise TaskFormatError(folder / "test_files.json", "test_files", str(exc)) from exc
        if not (hidden / rel).exists():
            raise TaskFormatError(
                folder / "test_files.json", "test_files", f"hidden test path {rel!r} not found under {hidden}"
            )
    reference = folder / "reference"
    starting = folder / "workspace"
    return Task(
        id=folder.name,
        domain="nl2repo",
        instruction=instruction,
        source=CopySource(((str(starting), "."),)) if starting.is_dir() else EmptySource(),
        scorer=NL2RepoScorer(
            test_files=tuple(files),
            test_commands=tuple(commands),
            test_case_count=count,
            hidden_root=str(hidden),
            skip_install=skip_install,
            env=dict(env or {}),
        ),
        agent_timeout=agent_timeout,
        test_timeout=test_timeout,
        solution=CopySolution(str(reference)) if reference.is_dir() else None,
        origin=str(folder),
        meta={"format": "nl2repobench"},
    )


def _string_list(path: Path, name: str) -> list[str]:
    data = read_json_file(path, name)
    check_type(data, name, list, path)
    for index, item in enumerate(data):
        check_type(item, f"{name}[{index}]", str, path)
    return list(data)
