"""Process-tree helpers over /proc: find every descendant of a process and kill them all.

Why not process groups alone: a sandboxed command may call setsid() (bash job control, daemons), which
moves it out of the group that ``killpg`` reaches. Walking parent links catches those as long as they have
not been orphaned yet. /proc/<pid>/task/<tid>/children is not present on every kernel, so the tree is
built from one scan of /proc/*/stat (about 1-2 ms for a hundred processes).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields after the command name of /proc/<pid>/stat (state is index 0, ppid 1, starttime 19)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    close = raw.rfind(b")")
    return raw[close + 2 :].split()


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def process_table() -> tuple[dict[int, int], dict[int, int]]:
    """(pid -> parent pid, pid -> resident bytes) for every live, non-zombie process visible in /proc."""
    parents: dict[int, int] = {}
    resident: dict[int, int] = {}
    try:
        entries = os.scandir("/proc")
    except OSError:
        return parents, resident
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            fields = _stat_fields(int(entry.name))
            if fields is None or fields[0] in (b"Z", b"X"):
                continue
            pid = int(entry.name)
            parents[pid] = int(fields[1])
            resident[pid] = int(fields[21]) * PAGE_BYTES if len(fields) > 21 else 0  # rss, in pages
    return parents, resident


def parent_map() -> dict[int, int]:
    """pid -> parent pid for every live, non-zombie process visible in /proc."""
    return process_table()[0]


def children_map(parents: dict[int, int]) -> dict[int, list[int]]:
    """parent pid -> its children, from a `parent_map` (build once when asking for many roots)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    return children


def descendants(root: int, parents: dict[int, int] | None = None, children: dict[int, list[int]] | None = None) -> list[int]:
    """All live descendants of ``root`` (not ``root`` itself), parents before children."""
    if children is None:
        children = children_map(parent_map() if parents is None else parents)
    found: list[int] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def start_time(pid: int) -> int | None:
    """Kernel start time of ``pid`` (clock ticks since boot), to tell a pid from a reused one."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def alive(pid: int, started: int | None = None) -> bool:
    """True while ``pid`` runs (not a zombie) and, if given, has the same start time."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X"):
        return False
    return started is None or (len(fields) > 19 and int(fields[19]) == started)


def kill_pids(pids: Iterable[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(root: int, *, include_root: bool = True, passes: int = 20) -> list[int]:
    """SIGKILL ``root``'s descendants (stopping them first so a fork bomb cannot outrun us), then root.

    Returns every pid that was signalled, so the caller can wait for them to be gone.
    """
    signalled: list[int] = []
    for _ in range(passes):
        pids = descendants(root)
        if not pids:
            break
        kill_pids(pids, signal.SIGSTOP)
        kill_pids(pids, signal.SIGKILL)
        signalled.extend(pids)
    if include_root:
        kill_pids([root])
        signalled.append(root)
    return signalled


def wait_gone(pids: Iterable[int], timeout: float = 3.0) -> list[int]:
    """Wait until none of ``pids`` runs any more; return those still running at the deadline."""
    pending = set(pids)
    deadline = time.monotonic() + timeout
    while pending:
        pending = {pid for pid in pending if alive(pid)}
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    return sorted(pending)


def command_line(pid: int) -> str | None:
    """``pid``'s command line, arguments joined by spaces (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (how a test or a benchmark finds leftovers)."""
    found = []
    for pid in parent_map():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(pid)
        except OSError:
            pass
    return found
