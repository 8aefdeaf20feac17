"""A throwaway pids cgroup per sandboxed command, when the machine lets us make one.

Why: RLIMIT_NPROC does not bind root (the kernel exempts uid 0 and CAP_SYS_RESOURCE), and inside a
user namespace that maps root to root it is still exempt. A cgroup's ``pids.max`` binds everyone, so it
is the hard process limit whenever a writable pids controller exists (cgroup v1 ``pids`` hierarchy, or a
cgroup v2 folder whose ``cgroup.subtree_control`` lists ``pids``, e.g. a systemd-delegated one named by
``root``). Where none exists the sandbox falls back to its watchdog (see `gyre.envs.sandbox`).

Note ``pids.max`` counts tasks, i.e. threads as well as processes.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)

_counter = itertools.count()


def _mounts() -> list[tuple[str, str, str, str]]:
    """(fstype, mount point, root inside the hierarchy, super options) of every cgroup mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        left_fields, right_fields = left.split(), right.split()
        if len(left_fields) < 5 or len(right_fields) < 3:
            continue
        fstype = right_fields[0]
        if fstype in ("cgroup", "cgroup2"):
            found.append((fstype, left_fields[4], left_fields[3], right_fields[2]))
    return found


def _own_paths() -> dict[str, str]:
    """controller list ('' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    return paths


def _inside(mount_point: str, mount_root: str, path: str) -> Path:
    rel = path
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        rel = path[len(mount_root) :]
    return Path(mount_point) / rel.lstrip("/")


def find_pids_parent(root: str | None = None) -> Path | None:
    """A folder under which we may create a child cgroup with a pids limit, or None."""
    if root:
        candidate = Path(root)
        return candidate if _usable(candidate, v2=(candidate / "cgroup.subtree_control").exists()) else None
    own = _own_paths()
    for fstype, point, mount_root, options in _mounts():
        if fstype == "cgroup" and "pids" in options.split(","):
            controllers = next((key for key in own if "pids" in key.split(",")), None)
            if controllers is not None:
                candidate = _inside(point, mount_root, own[controllers])
                if _usable(candidate, v2=False):
                    return candidate
    for fstype, point, mount_root, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            candidate = _inside(point, mount_root, own[""])
            if _usable(candidate, v2=True):
                return candidate
    return None


def _usable(folder: Path, *, v2: bool) -> bool:
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        return False
    if v2:
        try:
            return "pids" in (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            return False
    return True


class PidsCgroup:
    """A child cgroup with ``pids.max`` set; join it by writing a pid to `procs_file`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.procs_file = path / "cgroup.procs"

    @classmethod
    def create(cls, max_pids: int, root: str | None = None) -> PidsCgroup | None:
        """Make a fresh cgroup limited to ``max_pids`` tasks, or return None where none can be made."""
        parent = find_pids_parent(root)
        if parent is None:
            return None
        path = parent / f"gyre-sbx-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(int(max_pids)))
        except OSError as exc:
            log.debug("cannot create pids cgroup under %s: %s", parent, exc)
            try:
                path.rmdir()
            except OSError:
                pass
            return None
        return cls(path)

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs_file.read_text().split()]
        except OSError:
            return []

    def events_max(self) -> int:
        """How many forks this cgroup refused because of pids.max (cgroup v1 and v2 both keep it)."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self, timeout: float = 3.0) -> None:
        """SIGKILL every member until the cgroup is empty (members cannot fork past pids.max)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            members = self.pids()
            if not members:
                return
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        log.warning("cgroup %s still has members after %.1fs: %s", self.path, timeout, self.pids())

    def remove(self) -> None:
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
        log.warning("could not remove cgroup %s", self.path)
