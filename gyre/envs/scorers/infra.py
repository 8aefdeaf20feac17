"""Test infrastructure an agent could plant in its workspace to be paid without solving its task, and
resetting it before the hidden tests run.

What counts (the hacks an RL policy finds first):

- pytest configuration: ``conftest.py`` anywhere (hooks that rewrite outcomes, ``pytest_plugins``), and
  ``pytest.ini``/``.pytest.ini``/``tox.ini``/``setup.cfg``/``pyproject.toml`` in the folders pytest reads
  its configuration from (the workspace and every folder above a test path: ``addopts``, ``-p``);
- modules that stand in for the runner where Python imports from (the workspace and its ``src/``):
  ``pytest.py``, ``pytest/``, ``_pytest/``, ``py.py``, ``pluggy``, ``sitecustomize.py``,
  ``usercustomize.py`` and ``*.pth``.

Each such file is put back as the task's original has it, or removed when the original has none (a
from-scratch NL2Repo workspace has no original at all). The guarded runner (`gyre.envs.scorers.guard`)
already keeps most of these from acting; resetting them as well means a rule of one does not rest on the
other. Nothing here follows a symlink (`gyre.envs.workspace`).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from gyre.envs.workspace import place_file, relative_parts, remove_path

CONFIG_FILES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
SHADOW_NAMES = ("pytest.py", "pytest", "_pytest", "py.py", "pluggy", "pluggy.py", "sitecustomize.py",
                "usercustomize.py", "*.pth")  # fmt: skip
IMPORT_ROOTS = ("", "src")  # workspace-relative folders a test command puts on sys.path
SKIPPED_FOLDERS = (".git", ".hg", ".svn", "node_modules", "__pycache__")

Original = Callable[[str], bytes | None]  # a file as the task's starting workspace had it, None if absent


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _conftests(workspace: Path) -> list[str]:
    """Every ``conftest.py`` in the workspace (relative paths), never through a symlinked folder."""
    found = []
    for folder, dirs, files in os.walk(workspace, followlinks=False):
        dirs[:] = [d for d in dirs if d not in SKIPPED_FOLDERS]
        if "conftest.py" in files:
            found.append(os.path.relpath(os.path.join(folder, "conftest.py"), workspace))
    return found


def _config_folders(test_paths: Iterable[str]) -> list[str]:
    """The workspace and every folder above each test path: where pytest looks for its configuration."""
    folders = {""}
    for rel in test_paths:
        parts = relative_parts(rel)
        for depth in range(1, len(parts)):
            folders.add("/".join(parts[:depth]))
    return sorted(folders)


def _shadows(workspace: Path, folder: str) -> list[str]:
    base = workspace / folder if folder else workspace
    if not _is_dir(base):
        return []
    names = os.listdir(base)
    matched = {name for name in names for pattern in SHADOW_NAMES if fnmatch.fnmatchcase(name, pattern)}
    return sorted(f"{folder}/{name}" if folder else name for name in matched)


def neutralise(
    workspace: Path,
    *,
    test_paths: Iterable[str] = (),
    keep: Iterable[str] = (),
    original: Original | None = None,
) -> list[str]:
    """Reset the planted test infrastructure in ``workspace``; returns what changed ("reset PATH" or
    "removed PATH"). ``test_paths`` are the hidden tests' paths (their folders' configuration is reset
    too); ``keep`` are paths the scorer itself placed (the task's own conftest among its hidden tests)."""
    kept = {os.path.normpath(rel) for rel in keep}
    test_paths = list(test_paths)
    candidates = set(_conftests(workspace))
    for folder in _config_folders(test_paths):
        candidates.update(f"{folder}/{name}" if folder else name for name in CONFIG_FILES)
    for folder in IMPORT_ROOTS:
        candidates.update(_shadows(workspace, folder))
    changed = []
    for rel in sorted(candidates):
        if os.path.normpath(rel) in kept or any(os.path.normpath(rel).startswith(k + os.sep) for k in kept):
            continue
        content = original(rel) if original is not None else None
        if content is not None:
            target = workspace / rel
            try:
                same = not os.path.islink(target) and target.is_file() and target.read_bytes() == content
            except OSError:
                same = False
            if not same:
                place_file(workspace, rel, content)
                changed.append(f"reset {rel}")
        elif remove_path(workspace, rel):
            changed.append(f"removed {rel}")
    return changed
