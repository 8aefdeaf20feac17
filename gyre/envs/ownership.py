"""Who owns what a sandboxed command can write, and what it may leave behind on the host.

When Gyre runs as root, sandboxed commands run as an unprivileged host user (``Sandbox.uid``/``gid``,
``nobody`` by default), so nothing they do acts as the host's root. These helpers keep the host side of
that promise, all without following a symlink the command planted:

- `grant`: hand a folder (a fresh workspace, a control folder) to that user before the command starts;
- `strip_privileged_bits`: after it ends, clear setuid/setgid bits and remove device nodes from what it
  wrote, so no privileged file is left where the host will find it (the host's disks are not mounted
  ``nosuid``);
- `seal` / `unseal`: while hidden tests run on an agent's workspace, make the test files (and the folders
  above them) root's, with the sticky bit on those folders (as ``/tmp``): the code under test can still
  write files of its own, but not edit, rename or delete the tests it is being scored by.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from gyre.envs.workspace import relative_parts

SEALED_DIR_MODE = 0o1777  # sticky: only an entry's owner (root) may rename or delete it


def _walk(root: Path) -> Iterable[tuple[str, os.stat_result]]:
    """Every entry under ``root`` (root included) with its lstat, never descending through a symlink."""
    try:
        yield str(root), os.lstat(root)
    except FileNotFoundError:
        return
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    yield entry.path, info
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(entry.path)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue


def grant(root: str | os.PathLike[str], uid: int, gid: int) -> int:
    """Make everything under ``root`` owned by ``uid:gid`` (symlinks themselves, never their targets).

    Returns how many entries changed owner. Cheap when nothing needs to change (one lstat per entry).
    """
    changed = 0
    for path, info in _walk(Path(root)):
        if info.st_uid != uid or info.st_gid != gid:
            os.chown(path, uid, gid, follow_symlinks=False)
            changed += 1
    return changed


def is_granted(root: str | os.PathLike[str], uid: int) -> bool:
    """True when the folder itself is already ``uid``'s (its content was granted with it)."""
    try:
        return os.lstat(root).st_uid == uid
    except FileNotFoundError:
        return False


def is_sealed(root: str | os.PathLike[str]) -> bool:
    """True for a workspace `seal` left: root's, with the sticky bit."""
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return False
    return info.st_uid == 0 and bool(info.st_mode & stat.S_ISVTX)


def strip_privileged_bits(roots: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Clear setuid/setgid on every file and remove every device node under ``roots``.

    Returns the paths it changed (for the log). A setgid folder keeps nothing privileged either: the bit is
    cleared there too, so files made in it later do not inherit its group.
    """
    changed: list[str] = []
    for root in roots:
        for path, info in _walk(Path(root)):
            mode = info.st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                os.unlink(path)
                changed.append(path)
            elif (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
                changed.append(path)
    return changed


def _chain(workspace: Path, rel: str) -> list[Path]:
    """The workspace and every folder from it down to (not including) ``rel``."""
    folders = [workspace]
    current = workspace
    for part in relative_parts(rel)[:-1]:
        current = current / part
        folders.append(current)
    return folders


def seal(workspace: str | os.PathLike[str], rels: Iterable[str]) -> None:
    """Make the files at ``rels`` (files or folders, relative to ``workspace``) root's and read-only to
    others, and every folder above them root's and sticky, so a sandboxed command cannot change them.

    Folders on the way that are symlinks (or missing) are left alone: the path then does not lead into the
    workspace, and the scorer placed nothing there.
    """
    root = Path(workspace)
    for rel in rels:
        chain = _chain(root, rel)
        if not all(stat.S_ISDIR(os.lstat(folder).st_mode) for folder in chain if os.path.lexists(folder)):
            continue
        for folder in chain:
            if os.path.lexists(folder):
                os.chown(folder, 0, 0, follow_symlinks=False)
                os.chmod(folder, SEALED_DIR_MODE)
        for path, info in _walk(root.joinpath(*relative_parts(rel))):
            if stat.S_ISLNK(info.st_mode):
                continue
            os.chown(path, 0, 0, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                os.chmod(path, 0o755)
            else:
                executable = 0o111 if info.st_mode & 0o111 else 0
                os.chmod(path, 0o644 | executable)


def unseal(workspace: str | os.PathLike[str], uid: int, gid: int) -> None:
    """Give a sealed workspace back to the sandbox user (before the scorer installs its tests again)."""
    if not is_sealed(workspace):
        return
    for path, info in _walk(Path(workspace)):
        if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX and info.st_uid == 0:
            os.chmod(path, 0o755)
    grant(workspace, uid, gid)
