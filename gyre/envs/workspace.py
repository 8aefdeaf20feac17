"""Building starting workspaces, and touching an agent's workspace safely from outside the sandbox.

Sources (each a `gyre.envs.task.WorkspaceSource`):
- `EmptySource`: nothing (NL2RepoBench starts from an empty folder).
- `CopySource`: files and folders copied from the task folder (Terminal-Bench's Dockerfile ``COPY``).
- `TarballSource`: a bundled tarball of the repository at its base commit (one per instance).
- `GitMirrorSource`: a local git mirror of the repository, exported at ``base_commit``.

The two repository sources leave a fresh one-commit git repository (``git diff`` shows the agent's
change), never the mirror's history: a clone would let the agent read the future fix from later commits.

An agent controls its workspace, so code that writes into it from outside (copying hidden tests in,
deleting its packaging files) must not follow symlinks the agent planted (``tests -> /etc`` would make
a root process write into /etc): `place_file` and `remove_path` never follow one.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "gyre",
    "GIT_AUTHOR_EMAIL": "gyre@localhost",
    "GIT_COMMITTER_NAME": "gyre",
    "GIT_COMMITTER_EMAIL": "gyre@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def relative_parts(rel: str) -> list[str]:
    """Split a workspace-relative path, refusing absolute paths and ``..`` (a task file could be hostile)."""
    path = PurePosixPath(rel)
    if path.is_absolute() or any(part == ".." for part in path.parts) or not path.parts:
        raise ValueError(f"not a safe relative path: {rel!r}")
    return [part for part in path.parts if part != "."]


def _remove_node(path: Path) -> None:
    mode = os.lstat(path).st_mode
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def safe_parent(root: Path, rel: str) -> Path:
    """Make every folder above ``root/rel`` a real folder (replacing planted symlinks or files)."""
    parts = relative_parts(rel)
    current = root
    for part in parts[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            current.mkdir()
            continue
        if not stat.S_ISDIR(mode):  # a symlink (even to a folder) or a file: not ours to follow
            current.unlink()
            current.mkdir()
    return current / parts[-1]


def remove_path(root: Path, rel: str) -> bool:
    """Delete ``root/rel`` (file, folder or symlink) without following symlinks; True if it existed."""
    parts = relative_parts(rel)
    current = root
    for part in parts[:-1]:
        current = current / part
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False  # a symlinked or missing parent: the path is not inside the workspace
        except FileNotFoundError:
            return False
    target = current / parts[-1]
    try:
        _remove_node(target)
    except FileNotFoundError:
        return False
    return True


def place_file(root: Path, rel: str, data: bytes, mode: int = 0o644) -> Path:
    """Write ``data`` at ``root/rel``, replacing whatever (symlink, folder) the agent left there."""
    target = safe_parent(root, rel)
    try:
        _remove_node(target)
    except FileNotFoundError:
        pass
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(target, mode)
    return target


def place_tree(root: Path, rel: str, source: Path) -> None:
    """Copy a file or folder from a trusted ``source`` to ``root/rel`` with `place_file` semantics."""
    if source.is_dir():
        target = safe_parent(root, rel)
        try:
            if not stat.S_ISDIR(os.lstat(target).st_mode):
                _remove_node(target)
                target.mkdir()
        except FileNotFoundError:
            target.mkdir()
        for child in sorted(source.iterdir()):
            place_tree(root, f"{rel}/{child.name}", child)
    else:
        place_file(root, rel, source.read_bytes(), 0o755 if os.access(source, os.X_OK) else 0o644)


def read_text_nofollow(path: Path, limit: int = 1 << 20) -> str | None:
    """Read a small text file that a sandboxed command wrote, refusing symlinks; None when absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, OSError):
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit).decode("utf-8", errors="replace")


def patch_paths(patch: str) -> list[str]:
    """Files a unified diff touches (new names), in order of appearance."""
    paths: list[str] = []
    for line in patch.splitlines():
        name = None
        if line.startswith("diff --git "):
            pieces = line.split(" b/", 1)
            name = pieces[1] if len(pieces) == 2 else None
        elif line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            name = line[4:].split("\t")[0]
            name = name.removeprefix("b/")
        if name and name not in paths:
            paths.append(name)
    return paths


def git_baseline(dest: Path) -> None:
    """Make ``dest`` a one-commit git repository so the agent's change is ``git diff`` from it."""
    if (dest / ".git").exists():
        return
    env = {**os.environ, **GIT_IDENTITY}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "base", "--no-gpg-sign"]):
        subprocess.run(
            ["git", "-c", "init.defaultBranch=main", *args], cwd=dest, env=env, check=True, capture_output=True
        )


def extract_tar(data: bytes | Path, dest: Path, members: Sequence[str] | None = None) -> None:
    """Extract a (possibly compressed) tarball safely (``filter='data'``), dropping one shared top folder."""
    source = {"fileobj": io.BytesIO(data)} if isinstance(data, bytes) else {"name": data}
    with tarfile.open(**source) as archive:
        infos = [m for m in archive.getmembers() if m.name not in (".", "./")]
        prefix = _common_top(infos)
        chosen = []
        for info in infos:
            name = info.name.removeprefix("./")
            name = name[len(prefix) :] if prefix else name
            if not name:
                continue
            if members is not None and name not in members:
                continue
            info.name = name
            chosen.append(info)
        archive.extractall(dest, members=chosen, filter="data")


def _common_top(infos: Iterable[tarfile.TarInfo]) -> str:
    """'top/' when every member lives under one top folder (GitHub-style tarballs), else ''."""
    tops = set()
    has_nested = False
    for info in infos:
        name = info.name.removeprefix("./")
        head, sep, _ = name.partition("/")
        tops.add(head)
        has_nested = has_nested or bool(sep)
        if len(tops) > 1:
            return ""
    return f"{next(iter(tops))}/" if len(tops) == 1 and has_nested else ""


def read_tar_member(path: Path, rel: str) -> bytes | None:
    """One file's bytes from a repository tarball (same top-folder rule as `extract_tar`)."""
    with tarfile.open(path) as archive:
        infos = archive.getmembers()
        prefix = _common_top(infos)
        for info in infos:
            name = info.name.removeprefix("./")
            name = name[len(prefix) :] if prefix else name
            if name == rel and info.isfile():
                handle = archive.extractfile(info)
                return handle.read() if handle else None
    return None


@dataclass
class EmptySource:
    """An empty starting folder."""

    def materialise(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return "empty workspace"


@dataclass
class CopySource:
    """Copy ``(source path, workspace-relative target)`` pairs; a target of ``.`` copies a folder's contents."""

    copies: tuple[tuple[str, str], ...] = ()

    def materialise(self, dest: Path) -> None:
        for source, target in self.copies:
            src = Path(source)
            if target in (".", "", "./"):
                if src.is_dir():
                    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
                else:
                    shutil.copy2(src, dest / src.name)
                continue
            out = dest / target
            if src.is_dir():
                shutil.copytree(src, out, symlinks=True, dirs_exist_ok=True)
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, out)

    def describe(self) -> str:
        return f"{len(self.copies)} copied path(s)" if self.copies else "empty workspace"


@dataclass
class TarballSource:
    """A repository snapshot shipped as a tarball; a git baseline is made when it has no ``.git``."""

    path: str
    git: bool = True

    def materialise(self, dest: Path) -> None:
        extract_tar(Path(self.path), dest)
        if self.git:
            git_baseline(dest)

    def original(self, rel: str) -> bytes | None:
        """A file as it was at the base commit (None when it did not exist)."""
        return read_tar_member(Path(self.path), rel)

    def describe(self) -> str:
        return f"tarball {os.path.basename(self.path)}"


@dataclass
class GitMirrorSource:
    """A local git mirror exported at ``commit`` (history not copied: see the module note)."""

    mirror: str
    commit: str
    git: bool = True

    def materialise(self, dest: Path) -> None:
        archive = subprocess.run(
            ["git", "-C", self.mirror, "archive", "--format=tar", self.commit],
            capture_output=True,
            check=False,
            env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
        )
        if archive.returncode != 0:
            raise RuntimeError(
                f"git archive {self.commit} in mirror {self.mirror} failed: {archive.stderr.decode(errors='replace')}"
            )
        extract_tar(archive.stdout, dest)
        if self.git:
            git_baseline(dest)

    def original(self, rel: str) -> bytes | None:
        shown = subprocess.run(
            ["git", "-C", self.mirror, "show", f"{self.commit}:{rel}"], capture_output=True, check=False
        )
        return shown.stdout if shown.returncode == 0 else None

    def describe(self) -> str:
        return f"mirror {os.path.basename(self.mirror)}@{self.commit[:10]}"
