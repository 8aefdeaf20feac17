"""Throwaway cgroups per sandboxed command, when the machine lets us make them: pids, and cpu on cgroup v1.

Why: RLIMIT_NPROC does not bind root (the kernel exempts uid 0 and CAP_SYS_RESOURCE), and inside a
user namespace that maps root to root it is still exempt. A cgroup's ``pids.max`` binds everyone, so it
is the hard process limit whenever a writable pids controller exists (cgroup v1 ``pids`` hierarchy, or a
cgroup v2 folder whose ``cgroup.subtree_control`` lists ``pids``, e.g. a systemd-delegated one named by
``root``). Where none exists the sandbox falls back to its watchdog (see `gyre.envs.sandbox`).

Note ``pids.max`` counts tasks, i.e. threads as well as processes.

CPU: a command in a cgroup of its own competes with other sandboxes (and with Gyre's own processes) as
one entity with the default weight, however many processes it runs, so a fork bomb or a burst of busy
processes in one sandbox takes one share of the CPUs, not most of them. On cgroup v2 the pids cgroup
already gives that where its parent enables ``cpu``; on v1 the cpu hierarchy is separate (`CpuCgroup`).
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
        return candidate if _usable(candidate, "pids", v2=(candidate / "cgroup.subtree_control").exists()) else None
    found = _v1_parent("pids")
    if found is not None:
        return found
    own = _own_paths()
    for fstype, point, mount_root, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            candidate = _inside(point, mount_root, own[""])
            if _usable(candidate, "pids", v2=True):
                return candidate
    return None


def _v1_parent(controller: str) -> Path | None:
    """This process's cgroup in the v1 hierarchy of ``controller``, when we may create children there."""
    own = _own_paths()
    for fstype, point, mount_root, options in _mounts():
        if fstype == "cgroup" and controller in options.split(","):
            controllers = next((key for key in own if controller in key.split(",")), None)
            if controllers is not None:
                candidate = _inside(point, mount_root, own[controllers])
                if _usable(candidate, controller, v2=False):
                    return candidate
    return None


def _usable(folder: Path, controller: str, *, v2: bool) -> bool:
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        return False
    if v2:
        try:
            return controller in (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            return False
    return True


def _new_child(parent: Path, setup: dict[str, str]) -> Path | None:
    """A fresh child folder of ``parent`` with ``setup`` written into it, or None."""
    path = parent / f"gyre-sbx-{os.getpid()}-{next(_counter)}"
    try:
        path.mkdir()
        for name, value in setup.items():
            (path / name).write_text(value)
    except OSError as exc:
        log.debug("cannot create cgroup under %s: %s", parent, exc)
        try:
            path.rmdir()
        except OSError:
            pass
        return None
    return path


def _remove(path: Path) -> None:
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    log.warning("could not remove cgroup %s", path)


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
        path = _new_child(parent, {"pids.max": str(int(max_pids))})
        return cls(path) if path is not None else None

    def pids(self) -> list[int]:
        return _members(self.procs_file)

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
        _kill_members(self.procs_file, timeout)

    def remove(self) -> None:
        self.kill_all()
        _remove(self.path)


class CpuCgroup:
    """A child cgroup of the v1 cpu hierarchy with the default weight (see the module docstring); join it
    by writing a pid to `procs_file`. Remove it once its processes are gone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.procs_file = path / "cgroup.procs"

    @classmethod
    def create(cls) -> CpuCgroup | None:
        parent = _v1_parent("cpu")
        if parent is None:
            return None
        path = _new_child(parent, {})
        return cls(path) if path is not None else None

    def remove(self) -> None:
        _kill_members(self.procs_file, 3.0)
        _remove(self.path)


def _members(procs_file: Path) -> list[int]:
    try:
        return [int(x) for x in procs_file.read_text().split()]
    except OSError:
        return []


def _kill_members(procs_file: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        members = _members(procs_file)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    log.warning("cgroup %s still has members after %.1fs: %s", procs_file.parent, timeout, _members(procs_file))
