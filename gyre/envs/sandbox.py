"""Run a command confined to one workspace folder, with CPU, memory, process and output limits.

Two kinds, chosen by ``kind``:

- ``bwrap`` (bubblewrap): a new mount, pid, network, ipc, uts and user namespace. The system (``/usr``,
  ``/bin``, ``/lib*``, a short list of ``/etc`` files) and the Python that runs Gyre (``sys.prefix`` and
  ``sys.base_prefix``, so tests can run ``python -m pytest``) are bound read-only; the workspace is the only
  writable host folder; ``/tmp`` and ``/dev/shm`` are fresh tmpfs of ``tmp_mb`` each; ``/proc/sys`` is
  read-only; the command cannot make user namespaces of its own (``--disable-userns``); no capabilities;
  ``--die-with-parent`` and ``--new-session``. Never host root: when Gyre runs as root, bwrap itself is
  started as the unprivileged host user ``uid``:``gid`` (``nobody`` by default; `runs_as`), so files the
  command writes are that user's on the host and host-global kernel settings are not its to change. The
  writable folders are handed to that user before the command starts, and setuid/setgid bits and device
  nodes are cleared from them when it ends (`gyre.envs.ownership`). The command has its own network namespace (its
  own loopback, nothing of the host's) unless ``network=True``, which shares the host's network and gives
  that isolation up. A host service the command must reach (the proxy, for a harness) is given as a
  `Forward`: a host Unix socket bound into the sandbox, exposed on the sandbox's own loopback by a small
  forwarder (``_forward.py``) that runs the command. bwrap reads its options from a file descriptor
  (``--args``), so ``/proc/1/cmdline`` inside shows no host path. The workspace appears at its host
  path unless a ``workdir`` is given (``/app`` for Terminal-Bench), so by default a path means the same
  thing inside and outside, and the same under both kinds.
- ``process``: the fallback where bwrap is missing or refuses to run. Same limits, own session and
  process group, killed as a tree. It does NOT isolate the file system or the network, and it runs as
  Gyre's own user; a warning says so, and it refuses a `Forward` (a model-using harness) unless
  ``allow_unisolated=True``.

``auto`` picks bwrap when ``bwrap`` is on PATH and a probe run (as the user commands will run as)
succeeds, else process.

Limits:
- ``cpu_seconds``: RLIMIT_CPU per process (SIGXCPU, then SIGKILL one second later).
- ``memory_mb``: RLIMIT_AS per process (address space; generous for runtimes that reserve a lot, such as
  node, so raise it for harness processes).
- ``max_processes``: a pids cgroup when one can be created (hard limit, binds root too; counts threads;
  the first refused fork kills the tree); RLIMIT_NPROC when not root; and always a watchdog that counts
  the command's processes every ``WATCHDOG_INTERVAL`` seconds and kills the whole tree past the limit
  (the only guard for root without cgroups, since the kernel exempts root from RLIMIT_NPROC).
- CPU: where a cgroup can be made (``cgroup``), each command is one entity for the scheduler, with the
  default weight, however many processes it runs (`gyre.envs.cgroup`): a busy or forking sandbox takes
  one share of the CPUs, not most of them.
- ``total_memory_mb``: resident memory of all the command's processes together, summed by the watchdog
  every ``WATCHDOG_INTERVAL`` (pages shared between processes count once per process, so it errs high);
  past it the tree is killed (limit ``memory``).
- ``disk_mb``: disk used by the command's writable host folders (workspace, writable mounts, the process
  kind's private /tmp), walked every ``DISK_INTERVAL`` seconds or more (a walk may take at most 1% of
  the time); past it the tree is killed (limit ``disk``). Also the largest file a process may write
  (RLIMIT_FSIZE), so one file cannot outrun the walk.
- ``max_output_bytes``: per stream; beyond it the head and the tail are kept with a marker between and
  ``truncated=True`` is set. Never silent.
- ``timeout``: wall clock; the whole tree is killed and ``timed_out=True``. Nothing is left running when
  ``run`` returns (checked, not assumed).
- ``nice``: niceness of the command (0 = unchanged). A positive value keeps Gyre's own threads (the
  watchdog above all) responsive when a sandbox floods the CPUs.

Limits are applied with the ``prlimit`` binary when present (no ``preexec_fn``, which is unsafe in a
threaded parent), else with ``preexec_fn``.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gyre.envs import ownership, proctree
from gyre.envs.cgroup import CpuCgroup, PidsCgroup
from gyre.envs.errors import SandboxError
from gyre.envs.usage import disk_bytes

log = logging.getLogger(__name__)

KINDS = ("auto", "bwrap", "process")
WATCHDOG_INTERVAL = 0.05
DISK_INTERVAL = 2.0  # seconds between two walks of a command's writable folders, at least
FORWARD_DIR = "/run/gyre"  # where a Forward's socket folder and the forwarder appear inside bwrap
FORWARDER = Path(__file__).with_name("_forward.py")
ENTER = Path(__file__).with_name("_enter.py")  # root -> unprivileged bwrap, with its binds staged
# /etc entries a command usually needs (name lookup, the dynamic linker, TLS roots, locale, git).
ETC_ENTRIES = (
    "passwd",
    "group",
    "hosts",
    "hostname",
    "resolv.conf",
    "nsswitch.conf",
    "host.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "timezone",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "gitconfig",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "environment",
    "os-release",
    "debian_version",
    "lsb-release",
    "login.defs",
    "pip.conf",
    "locale.alias",
)
TOP_LEVEL_SYSTEM = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
DEFAULT_UID = DEFAULT_GID = 65534  # nobody/nogroup: what sandboxed commands run as when Gyre is root


@dataclass(frozen=True)
class Mount:
    """An extra folder to show inside the sandbox: ``source`` on the host, at ``target`` inside.

    ``target=None`` keeps the host path. The process kind cannot move paths: there a mount is visible
    only at its source path, so callers pass paths through `Launch.path`.
    """

    source: str
    target: str | None = None
    writable: bool = False


@dataclass(frozen=True)
class Forward:
    """A host service the sandboxed command reaches at ``host:port`` on its own loopback: connections there
    are relayed to the Unix socket ``socket`` on the host (whose listener decides what gets through).

    Under the process kind (no network namespace) the command reaches ``host:port`` of the host directly,
    and only with ``allow_unisolated``."""

    socket: str
    host: str
    port: int


@dataclass
class SandboxResult:
    """What a sandboxed command did. ``returncode`` is negative for a signal, as in subprocess."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration: float
    limit: str | None = None  # "timeout" | "max_processes" | "memory" | "disk" | "cpu_seconds" | None
    kind: str = ""

    @property
    def output(self) -> str:
        """stdout then stderr, for parsers that do not care which stream a line came from."""
        if self.stdout and self.stderr:
            return self.stdout + ("" if self.stdout.endswith("\n") else "\n") + self.stderr
        return self.stdout or self.stderr

    def tail(self, chars: int = 4000) -> str:
        text = self.output
        return text[-chars:]


class _Capture:
    """Collects one output stream up to ``cap`` bytes, keeping the head and the tail."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.head_cap = self.cap // 2
        self.tail_cap = self.cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_cap > 0:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail_cap else b""
        dropped = self.total - len(self.head) - len(tail)
        marker = f"\n[... gyre sandbox: {dropped} bytes of output dropped (max_output_bytes={self.cap}) ...]\n"
        return self.head.decode("utf-8", errors="replace") + marker + tail.decode("utf-8", errors="replace")


class Launch:
    """A prepared sandboxed command: argv and env to spawn, and the means to clean up after it.

    `Sandbox.run` uses it; a harness that must stream or await a long process can spawn
    ``launch.argv`` itself (``env=launch.env, cwd=launch.cwd, start_new_session=True``), then call
    `attach` with the pid, `kill` to stop everything, `exited` once it has reaped the process, and
    `close` when done. After `exited` no signal is sent to the (possibly reused) pid any more. Spawn it
    with ``pass_fds=launch.pass_fds`` (bwrap reads its options from one).
    `kill` and `close` block until the processes are gone (normally milliseconds, at most ~10 s):
    from an event loop, call them with ``asyncio.to_thread``.
    """

    def __init__(
        self,
        *,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        kind: str,
        path_map: dict[str, str],
        cgroup: PidsCgroup | None,
        max_processes: int | None,
        private_tmp: str | None,
        preexec: Any = None,
        pass_fds: tuple[int, ...] = (),
        shared_fds: tuple[int, ...] = (),
        cpu_cgroup: CpuCgroup | None = None,
        memory_limit: int | None = None,
        disk_limit: int | None = None,
        writable: tuple[str, ...] = (),
    ) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.kind = kind
        self.path_map = path_map
        self.cgroup = cgroup
        self.max_processes = max_processes
        self.private_tmp = private_tmp
        self.preexec = preexec
        self.owned_fds = pass_fds  # bwrap's --args: inherited by the spawned process, closed by `close`
        self.pass_fds = pass_fds + shared_fds  # all it inherits; the caller's own (shared) ones stay open
        self.cpu_cgroup = cpu_cgroup
        self.memory_limit = memory_limit  # bytes of resident memory of the whole tree
        self.disk_limit = disk_limit  # bytes on disk under ``writable``
        self.writable = writable
        self.disk_used = 0  # at the last walk
        self._next_disk_check = 0.0
        self.pid: int | None = None
        self.limit_hit: str | None = None
        self.forks_refused = 0  # forks the cgroup refused (pids.max reached), read at close
        self._inits: list[int] = []  # bwrap: the pid namespace's init, child of the outer bwrap
        self._lock = threading.Lock()
        self._closed = False
        self._reaped = False

    def path(self, host_path: str | os.PathLike[str]) -> str:
        """Where a host path (the workspace or a mount) appears inside the sandbox."""
        text = os.path.abspath(os.fspath(host_path))
        for source in sorted(self.path_map, key=len, reverse=True):
            if text == source or text.startswith(source.rstrip("/") + "/"):
                return self.path_map[source] + text[len(source) :]
        return text

    def start(self, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        """Spawn the command with piped stdout/stderr and register it with the watchdog."""
        try:
            proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=self.preexec,  # noqa: PLW1509 - None unless prlimit is missing (see _limit_prefix)
                close_fds=True,
                pass_fds=self.pass_fds,
            )
        except OSError as exc:
            self.close()
            raise SandboxError(f"cannot start sandboxed command {self.argv[:3]}...: {exc}") from exc
        self.attach(proc.pid)
        return proc

    def attach(self, pid: int) -> None:
        """Track ``pid`` (the process spawned from ``argv``) for limits and cleanup."""
        self.pid = pid
        _WATCHDOG.register(self)

    def watch(self, parents: dict[int, int], children: dict[int, list[int]], resident: dict[int, int]) -> None:
        """Called by the watchdog: enforce the limits no kernel mechanism enforces for us (processes
        without a cgroup, resident memory of the tree, disk), and end the command on a refused fork."""
        if self.pid is None or self._closed or self._reaped or self.limit_hit is not None:
            return
        if self.kind == "bwrap" and not self._inits:
            self._inits = list(children.get(self.pid, ()))
        if self.cgroup is not None and self.max_processes is not None and self.cgroup.events_max() > 0:
            self._stop("max_processes", f"a fork was refused at max_processes={self.max_processes}")
            return
        tree: list[int] | None = None
        if self.cgroup is None and self.max_processes is not None:
            tree = proctree.descendants(self.pid, children=children)
            if len(tree) > self.max_processes:
                self._stop("max_processes", f"{len(tree)} processes > max_processes={self.max_processes}")
                return
        if self.memory_limit is not None:
            tree = proctree.descendants(self.pid, children=children) if tree is None else tree
            used = sum(resident.get(pid, 0) for pid in tree)
            if used > self.memory_limit:
                self._stop("memory", f"{used >> 20} MiB resident > total_memory_mb={self.memory_limit >> 20}")
                return
        if self.disk_limit is not None and time.monotonic() >= self._next_disk_check:
            began = time.monotonic()
            self.disk_used = disk_bytes(self.writable)
            spent = time.monotonic() - began
            self._next_disk_check = began + max(DISK_INTERVAL, 100 * spent)  # walks take <= 1% of the time
            if self.disk_used > self.disk_limit:
                self._stop("disk", f"{self.disk_used >> 20} MiB on disk > disk_mb={self.disk_limit >> 20}")

    def exhausted(self) -> str | None:
        """The limit that ended the command, if one did: the watchdog's, or a fork the cgroup refused
        (the command may have exited on its own right after, before the watchdog looked)."""
        if self.limit_hit is None and self.cgroup is not None and self.cgroup.events_max() > 0:
            return "max_processes"
        return self.limit_hit

    def _stop(self, limit: str, why: str) -> None:
        log.warning("sandbox: %s; killing the command", why)
        self.limit_hit = limit
        self.kill()

    def kill(self) -> None:
        """SIGKILL everything the command started and wait until it is gone.

        bwrap: killing the pid namespace's init makes the kernel kill every process in the namespace at
        once (no race with a fork bomb). process: the supervisor's process group is frozen with one
        SIGSTOP, then the tree under the supervisor (complete, since it adopts orphans) is frozen and
        killed pass by pass, the supervisor last. A cgroup, when there is one, is emptied last.
        """
        with self._lock:
            if self.pid is None or self._reaped:
                if self.cgroup is not None:
                    self.cgroup.kill_all()
                return
            if self.kind == "bwrap":
                # The outer bwrap's death alone kills the init (--die-with-parent); kill both anyway.
                # The init is known from the watchdog's first look; scanning /proc now could be slow
                # under a fork bomb, so only scan when it is not known yet.
                inits = self._inits or [pid for pid, ppid in proctree.parent_map().items() if ppid == self.pid]
                proctree.kill_pids([self.pid] + inits)
                proctree.wait_gone(inits, timeout=10.0)
            else:
                try:  # freeze the supervisor's whole group at once: nothing in it can fork any more
                    os.killpg(self.pid, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
                signalled = proctree.kill_tree(self.pid, include_root=False)
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proctree.kill_pids([self.pid])
                proctree.wait_gone(signalled, timeout=10.0)
            if self.cgroup is not None:
                self.cgroup.kill_all()

    def exited(self) -> None:
        """The spawned process was reaped. Its leftovers are gone already (the pid namespace dies with
        bwrap's init; the process supervisor kills what it adopted) except in a cgroup, swept here."""
        with self._lock:
            self._reaped = True
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def close(self) -> None:
        """Kill whatever still runs, remove the cgroup and the private /tmp. Idempotent."""
        if self._closed:
            return
        self.kill()
        self._closed = True
        _WATCHDOG.unregister(self)
        if self.cgroup is not None:
            self.forks_refused = self.cgroup.events_max()
            self.cgroup.remove()
        if self.cpu_cgroup is not None:
            self.cpu_cgroup.remove()  # empty now: everything was killed above
        if self.private_tmp:
            shutil.rmtree(self.private_tmp, ignore_errors=True)
        # Everything is dead: nothing it left in the host's folders may be setuid, setgid or a device.
        stripped = ownership.strip_privileged_bits(self.writable)
        if stripped:
            log.warning("sandbox: cleared setuid/setgid bits or removed device nodes left by a command: %s", stripped[:5])
        for fd in self.owned_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.owned_fds = self.pass_fds = ()


class _Watchdog:
    """One thread for all live launches: a /proc scan per interval, shared by every sandbox."""

    def __init__(self) -> None:
        self._launches: set[Launch] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def register(self, launch: Launch) -> None:
        with self._lock:
            self._launches.add(launch)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="gyre-sandbox-watchdog", daemon=True)
                self._thread.start()

    def unregister(self, launch: Launch) -> None:
        with self._lock:
            self._launches.discard(launch)

    def _loop(self) -> None:
        while True:
            with self._lock:
                launches = list(self._launches)
                if not launches:
                    self._thread = None
                    return
            parents, resident = proctree.process_table()
            children = proctree.children_map(parents)
            for launch in launches:
                try:
                    launch.watch(parents, children, resident)
                except Exception:  # never let one launch kill the watchdog of all others
                    log.exception("sandbox watchdog failed on a launch")
            time.sleep(WATCHDOG_INTERVAL)


_WATCHDOG = _Watchdog()
_BWRAP_PROBE: dict[str, str | None] = {}
_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message)


@dataclass
class Sandbox:
    """Sandbox configuration (Hydra group ``env.sandbox``); `run` executes one command under it."""

    kind: str = "auto"
    cpu_seconds: float | None = 600.0
    memory_mb: int | None = 4096
    max_processes: int | None = 256
    max_output_bytes: int = 1_000_000
    timeout: float = 600.0
    network: bool = False
    ro_paths: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cgroup: bool = True
    cgroup_root: str | None = None
    nice: int = 0
    total_memory_mb: int | None = 8192
    disk_mb: int | None = 8192
    tmp_mb: int | None = 1024
    allow_unisolated: bool = False
    uid: int = DEFAULT_UID
    gid: int = DEFAULT_GID

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Sandbox.kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.allow_unisolated, bool):
            raise TypeError(f"Sandbox.allow_unisolated must be true or false, got {self.allow_unisolated!r}")
        for name in ("cpu_seconds", "memory_mb", "max_processes", "total_memory_mb", "disk_mb", "tmp_mb"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"Sandbox.{name} must be > 0 or None, got {value}")
        if self.max_output_bytes < 1024:
            raise ValueError(f"Sandbox.max_output_bytes must be >= 1024, got {self.max_output_bytes}")
        if self.timeout <= 0:
            raise ValueError(f"Sandbox.timeout must be > 0, got {self.timeout}")
        if not 0 <= self.nice <= 19:
            raise ValueError(f"Sandbox.nice must be in [0, 19], got {self.nice}")
        for name in ("uid", "gid"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"Sandbox.{name} must be an unprivileged id (an int > 0), got {value!r}")
        self.ro_paths = tuple(self.ro_paths)
        self.env = dict(self.env)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> Sandbox:
        """Build from a (Hydra) mapping; an unknown key fails loudly with its name."""
        data = dict(config or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"env.sandbox: unknown key(s) {unknown}; known keys are {sorted(known)}")
        if "ro_paths" in data and data["ro_paths"] is not None:
            data["ro_paths"] = tuple(str(p) for p in data["ro_paths"])
        if "env" in data:
            data["env"] = {str(k): str(v) for k, v in dict(data["env"] or {}).items()}
        return cls(**data)

    def replace(self, **changes: Any) -> Sandbox:
        return dataclasses.replace(self, **changes)

    def inner_workspace(self, workspace: str | os.PathLike[str], workdir: str | None = None) -> str:
        """Where the workspace appears to the command (``workdir`` under bwrap when given)."""
        if workdir and self.resolved_kind() == "bwrap":
            return workdir
        return os.path.abspath(os.fspath(workspace))

    def visible_path(self, mount: Mount) -> str:
        """Where ``mount`` appears to the command: its target under bwrap, its source otherwise."""
        if mount.target and self.resolved_kind() == "bwrap":
            return mount.target
        return os.path.abspath(mount.source)

    # ------------------------------------------------------------------ kind selection

    def resolved_kind(self) -> str:
        """``bwrap`` or ``process``: what this configuration will actually use on this machine."""
        if self.kind == "process":
            return "process"
        problem = bwrap_problem(self.uid, self.gid)
        if problem is None:
            return "bwrap"
        if self.kind == "bwrap":
            raise SandboxError(f"sandbox.kind=bwrap but bubblewrap cannot run here: {problem}")
        _warn_once(
            "fallback",
            f"bubblewrap unavailable ({problem}); using the process sandbox: the file system and the "
            "NETWORK ARE NOT ISOLATED. Install bubblewrap (apt-get install -y bubblewrap) for isolation.",
        )
        return "process"

    def unisolated_refusal(self) -> str | None:
        """Why a model-using harness (an untrusted agent that must reach the proxy) may not run in this
        sandbox, or None when it may: the process kind isolates nothing, so it needs the user's opt-in."""
        if self.resolved_kind() != "process" or self.allow_unisolated:
            return None
        why = "env.sandbox.kind=process" if self.kind == "process" else f"bubblewrap is unavailable: {bwrap_problem(self.uid, self.gid)}"
        return (
            f"refusing to run a model-using harness in the process sandbox ({why}): it isolates neither the "
            "network nor the file system, so the agent could reach this machine's services (Ray, the driver, "
            "the proxy's other routes) and other executions' files. Install bubblewrap "
            "(apt-get install -y bubblewrap; sandboxes use it by default), or set "
            "env.sandbox.allow_unisolated=true to run the agent unisolated anyway."
        )

    def isolates_network(self) -> bool:
        """True when a command gets its own network namespace here (a host service must be forwarded)."""
        return self.resolved_kind() == "bwrap" and not self.network

    def runs_as(self) -> tuple[int, int] | None:
        """The host (uid, gid) commands run as when that is not Gyre's own user: Gyre runs as root and the
        sandbox is bwrap. None otherwise (the process kind runs as Gyre's user: it isolates nothing)."""
        if os.geteuid() != 0 or self.resolved_kind() != "bwrap":
            return None
        return self.uid, self.gid

    # ------------------------------------------------------------------ building a launch

    def prepare(
        self,
        command: str | Sequence[str],
        workspace: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        mounts: Sequence[Mount] = (),
        workdir: str | None = None,
        cwd: str | None = None,
        network: bool | None = None,
        forward: Forward | None = None,
        pass_fds: Sequence[int] = (),
    ) -> Launch:
        """Build (but do not start) the sandboxed command.

        ``command`` is a shell string (run by bash, else sh) or an argv list. ``workdir`` is where the
        workspace appears inside a bwrap sandbox (host path when None). ``cwd`` is a folder relative to
        the workspace to start in. ``env`` is added to a clean environment (the host's is not inherited).
        ``network`` overrides ``self.network``; ``forward`` makes one host service reachable (see
        `Forward`): the process kind refuses it unless ``allow_unisolated``. ``pass_fds`` are the caller's
        open files the command inherits (at the same numbers); the caller closes them.
        """
        workspace_path = Path(workspace).absolute()
        if not workspace_path.is_dir():
            raise SandboxError(f"sandbox workspace {workspace_path} is not a folder")
        kind = self.resolved_kind()
        owner = self.runs_as()
        share_net = self.network if network is None else network
        if forward is not None and kind == "process":
            refusal = self.unisolated_refusal()
            if refusal is not None:
                raise SandboxError(refusal)
            forward = None  # opted in: the command reaches the service's host address directly
        if forward is not None and share_net:
            forward = None  # the host's network is shared: the address is reachable as it is
        if workdir is not None and not os.path.isabs(workdir):
            raise SandboxError(f"sandbox workdir must be absolute, got {workdir!r}")
        inner_ws = workdir if (kind == "bwrap" and workdir) else str(workspace_path)
        path_map = {str(workspace_path): inner_ws}
        for mount in mounts:
            source = os.path.abspath(mount.source)
            path_map[source] = mount.target if (kind == "bwrap" and mount.target) else source
        if isinstance(command, str):
            shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
            command_argv = [shell, "-c", command]
        else:
            command_argv = [str(part) for part in command]
            if not command_argv:
                raise SandboxError("sandbox command is empty")

        if owner is not None:
            self._hand_over(owner, workspace_path, mounts, forward)
        # Everything that can fail is checked above; only now take resources that need cleaning up.
        limit_argv, preexec = self._limit_prefix()
        owned_fds: tuple[int, ...] = ()
        if kind == "bwrap":
            inner_cwd = inner_ws if not cwd else os.path.join(inner_ws, cwd)
            stage = _Stage(owner is not None)
            options = self._bwrap_args(workspace_path, inner_ws, mounts, inner_cwd, share_net, forward, stage)
            if forward is not None:
                inner_socket = f"{FORWARD_DIR}/net/{os.path.basename(forward.socket)}"
                forwarder = [sys.executable, "-I", "-S", f"{FORWARD_DIR}/forward.py", forward.host, str(forward.port), inner_socket, "--"]
                command_argv = forwarder + command_argv
            args_fd = _args_fd(options)  # read by bwrap: its options stay out of every cmdline
            owned_fds = (args_fd,)
            enter = stage.enter(*owner) if owner is not None else []
            body = limit_argv + enter + [_bwrap_exe(), "--args", str(args_fd), "--"] + command_argv
            host_cwd, private_tmp = "/", None
        else:
            supervisor = [sys.executable, "-S", "-E", str(Path(__file__).with_name("_supervise.py"))]
            body = limit_argv + supervisor + command_argv
            host_cwd = str(workspace_path) if not cwd else str(workspace_path / cwd)
            private_tmp = tempfile.mkdtemp(prefix="gyre-sbx-tmp-")
            _warn_once("process", "process sandbox: commands can write outside the workspace and use the network")
        full_env = self._environment(inner_ws, "/tmp" if kind == "bwrap" else private_tmp, env)
        # Gyre's own processes and threads in the tree: bwrap's two, the forwarder (and its relay thread).
        own_processes = (2 if kind == "bwrap" else 0) + (1 if forward is not None else 0)
        cgroup = cpu_cgroup = None
        if self.max_processes is not None and self.cgroup:
            cgroup = PidsCgroup.create(self.max_processes + 4 + 2 * (forward is not None), self.cgroup_root)
        if self.cgroup and self.cgroup_root is None:
            cpu_cgroup = CpuCgroup.create()
        joins = [str(group.procs_file) for group in (cgroup, cpu_cgroup) if group is not None]
        argv = body
        if joins:  # join the cgroups before anything else runs, so every descendant is in them
            join = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'
            argv = ["/bin/sh", "-c", join, "gyre-sandbox", *joins, "--", *body]
        max_watch = None
        if self.max_processes is not None:
            max_watch = self.max_processes + own_processes
        writable = [str(workspace_path)] + [os.path.abspath(m.source) for m in mounts if m.writable]
        if private_tmp:
            writable.append(private_tmp)
        return Launch(
            argv=argv,
            env=full_env,
            cwd=host_cwd,
            kind=kind,
            path_map=path_map,
            cgroup=cgroup,
            cpu_cgroup=cpu_cgroup,
            max_processes=max_watch,
            private_tmp=private_tmp,
            preexec=preexec,
            pass_fds=owned_fds,
            shared_fds=tuple(pass_fds),
            memory_limit=None if self.total_memory_mb is None else self.total_memory_mb << 20,
            disk_limit=None if self.disk_mb is None else self.disk_mb << 20,
            writable=tuple(dict.fromkeys(writable)),
        )

    def _hand_over(
        self, owner: tuple[int, int], workspace: Path, mounts: Sequence[Mount], forward: Forward | None
    ) -> None:
        """Make what the command must write its user's, and the gate's socket reachable by that user.

        A workspace sealed for scoring (`ownership.seal`) keeps its owners: the tests in it stay root's."""
        folders = [workspace] + [Path(m.source).absolute() for m in mounts if m.writable]
        for folder in folders:
            if not ownership.is_granted(folder, owner[0]) and not ownership.is_sealed(folder):
                ownership.grant(folder, *owner)
        if forward is not None:
            os.chown(forward.socket, *owner)
            os.chmod(os.path.dirname(os.path.abspath(forward.socket)), 0o711)

    def _environment(self, inner_ws: str, inner_tmp: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {
            "PATH": command_path(),
            "HOME": inner_tmp or inner_ws,
            "TMPDIR": inner_tmp or "/tmp",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "GYRE_WORKSPACE": inner_ws,
            "TERM": "dumb",
        }
        env.update(self.env)
        env.update({str(k): str(v) for k, v in (extra or {}).items()})
        return env

    def _limit_prefix(self) -> tuple[list[str], Any]:
        limits: dict[str, tuple[int, int]] = {}
        if self.cpu_seconds is not None:
            soft = max(1, int(self.cpu_seconds))
            limits["cpu"] = (soft, soft + 1)
        if self.memory_mb is not None:
            size = int(self.memory_mb) * 1024 * 1024
            limits["as"] = (size, size)
        if self.disk_mb is not None:
            limits["fsize"] = (self.disk_mb << 20, self.disk_mb << 20)  # one file cannot outrun the disk walk
        if self.max_processes is not None and os.geteuid() != 0:
            # Non-root: RLIMIT_NPROC counts all of this user's processes, so allow the ones running now.
            allowed = self.max_processes + _user_process_count(os.getuid()) + 8
            limits["nproc"] = (allowed, allowed)
        limits["core"] = (0, 0)
        nice = ["nice", "-n", str(self.nice)] if self.nice else []
        prlimit = shutil.which("prlimit")
        if prlimit:
            return [prlimit] + [f"--{name}={soft}:{hard}" for name, (soft, hard) in limits.items()] + [
                "--"
            ] + nice, None
        import resource

        mapping = {
            "cpu": resource.RLIMIT_CPU,
            "as": resource.RLIMIT_AS,
            "nproc": resource.RLIMIT_NPROC,
            "core": resource.RLIMIT_CORE,
            "fsize": resource.RLIMIT_FSIZE,
        }

        def preexec() -> None:  # pragma: no cover - runs in the child
            for name, (soft, hard) in limits.items():
                resource.setrlimit(mapping[name], (soft, hard))

        _warn_once("prlimit", "prlimit not found: applying limits with preexec_fn (unsafe with threads)")
        return nice, preexec

    def _bwrap_args(
        self,
        workspace: Path,
        inner_ws: str,
        mounts: Sequence[Mount],
        inner_cwd: str,
        share_net: bool,
        forward: Forward | None,
        stage: _Stage,
    ) -> list[str]:
        """bwrap's options (everything before the command). Host folders are named through ``stage``
        (their staged path when bwrap starts unprivileged from root: see `_enter.py`)."""
        args = ["--die-with-parent", "--new-session", "--unshare-all", "--unshare-user"]
        if share_net:
            args.append("--share-net")
        if _bwrap_has("--disable-userns"):
            args.append("--disable-userns")  # no nested user namespace: no capabilities of its own anywhere
        args += ["--hostname", "sandbox", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
        size = ["--size", str(self.tmp_mb << 20)] if self.tmp_mb is not None and _bwrap_has("--size") else []
        args += [*size, "--tmpfs", "/tmp", *size, "--tmpfs", "/dev/shm"]
        args += ["--ro-bind", "/usr", "/usr"]
        for name in TOP_LEVEL_SYSTEM:
            top = Path("/") / name
            if top.is_symlink():
                args += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                args += ["--ro-bind", str(top), str(top)]
        for name in ETC_ENTRIES:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for path in _python_paths() + [os.path.abspath(p) for p in self.ro_paths]:
            if os.path.exists(path):
                args += ["--ro-bind", stage.path(path), path]
        args += ["--bind", stage.path(str(workspace)), inner_ws]
        for mount in mounts:
            source = os.path.abspath(mount.source)
            if not os.path.exists(source):
                raise SandboxError(f"sandbox mount source {source} does not exist")
            target = mount.target or source
            args += ["--bind" if mount.writable else "--ro-bind", stage.path(source), target]
        if forward is not None:
            folder = os.path.dirname(os.path.abspath(forward.socket))
            args += ["--ro-bind", stage.path(folder), f"{FORWARD_DIR}/net"]
            args += ["--ro-bind", stage.path(str(FORWARDER)), f"{FORWARD_DIR}/forward.py"]
        args += ["--chdir", inner_cwd]
        return args

    # ------------------------------------------------------------------ running

    def run(
        self,
        command: str | Sequence[str],
        workspace: str | os.PathLike[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        mounts: Sequence[Mount] = (),
        workdir: str | None = None,
        cwd: str | None = None,
        input: str | bytes | None = None,
        network: bool | None = None,
        pass_fds: Sequence[int] = (),
    ) -> SandboxResult:
        """Run ``command`` in the sandbox and wait for it (at most ``timeout`` or ``self.timeout`` s)."""
        launch = self.prepare(
            command, workspace, env=env, mounts=mounts, workdir=workdir, cwd=cwd, network=network, pass_fds=pass_fds
        )
        wall = self.timeout if timeout is None else timeout
        start = time.monotonic()
        proc = launch.start(stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            if input is not None:
                _feed_stdin(proc, input)
            out, err, timed_out = _collect(proc, launch, wall, self.max_output_bytes)
        finally:
            if proc.poll() is None:
                launch.kill()
                proc.wait()
            launch.exited()
            launch.close()
        duration = time.monotonic() - start
        limit = "timeout" if timed_out else launch.limit_hit
        if limit is None and launch.forks_refused:
            limit = "max_processes"
        if limit is None and proc.returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            limit = "cpu_seconds"
        return SandboxResult(
            returncode=proc.returncode,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            duration=duration,
            limit=limit,
            kind=launch.kind,
        )


def _feed_stdin(proc: subprocess.Popen[bytes], data: str | bytes) -> None:
    payload = data.encode() if isinstance(data, str) else data

    def write() -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(payload)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=write, daemon=True).start()


def _collect(
    proc: subprocess.Popen[bytes], launch: Launch, timeout: float, cap: int
) -> tuple[_Capture, _Capture, bool]:
    """Read both pipes until EOF, enforcing the wall timeout; kill leftovers once the command exits."""
    out, err = _Capture(cap), _Capture(cap)
    selector = selectors.DefaultSelector()
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        assert stream is not None
        os.set_blocking(stream.fileno(), False)
        selector.register(stream.fileno(), selectors.EVENT_READ, capture)
    deadline = time.monotonic() + timeout
    timed_out = False
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None:
                if proc.poll() is not None:
                    exited_at = now
                    launch.exited()
                elif now >= deadline:
                    timed_out = True
                    launch.kill()
                    proc.wait()
                    launch.exited()
                    exited_at = now
            elif now - exited_at > 2.0:
                break  # something we could not kill still holds a pipe; stop reading
            for key, _ in selector.select(timeout=0.05):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    key.data.feed(data)
                else:
                    selector.unregister(key.fd)
    finally:
        selector.close()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if exited_at is None:
        proc.wait()
        launch.exited()
    return out, err, timed_out


def _args_fd(options: Sequence[str]) -> int:
    """An anonymous in-memory file holding NUL-separated ``options``, at offset 0, for ``bwrap --args``."""
    fd = os.memfd_create("gyre-bwrap-args")  # close-on-exec: only the launch's pass_fds hands it over
    os.write(fd, b"".join(option.encode() + b"\0" for option in options))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_BWRAP_HELP: dict[str, str] = {}
_MISSING_OPTION = {
    "--size": "the sandbox's /tmp is not bounded by tmp_mb (bubblewrap 0.5 and later have --size)",
    "--disable-userns": "sandboxed commands can create nested user namespaces (bubblewrap 0.8 and later "
    "have --disable-userns)",
}


def _bwrap_has(option: str) -> bool:
    """Whether this bwrap knows ``option`` (read once from its ``--help``); warns once when it does not."""
    exe = shutil.which("bwrap") or "bwrap"
    if exe not in _BWRAP_HELP:
        try:
            done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10, check=False)
            _BWRAP_HELP[exe] = done.stdout + done.stderr
        except (OSError, subprocess.TimeoutExpired):
            _BWRAP_HELP[exe] = ""
    found = option in _BWRAP_HELP[exe]
    if not found:
        _warn_once(option, f"this bubblewrap has no {option}: {_MISSING_OPTION.get(option, 'option ignored')}")
    return found


def command_path() -> str:
    """PATH of a sandboxed command: the Python running Gyre first, then the system's folders."""
    folders = [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    return os.pathsep.join(dict.fromkeys(folders))


def _bwrap_exe() -> str:
    return shutil.which("bwrap") or "bwrap"


class _Stage:
    """The host paths bwrap binds, and how it reaches them. When it starts unprivileged from root
    (``staged``), each is bind-mounted by `_enter.py` at ``<stage folder>/<index>`` in a private mount
    namespace, since the sandbox's user may not be able to reach it by path; else it is used as it is."""

    _folder: str | None = None

    def __init__(self, staged: bool) -> None:
        self.staged = staged
        self.sources: list[str] = []

    def path(self, source: str) -> str:
        if not self.staged:
            return source
        self.sources.append(source)
        return f"{self.folder()}/{len(self.sources) - 1}"

    def enter(self, uid: int, gid: int) -> list[str]:
        """The argv prefix that stages the sources and becomes ``uid``:``gid`` before bwrap starts."""
        return [sys.executable, "-I", "-S", str(ENTER), str(uid), str(gid), self.folder(), *self.sources, "--"]

    @classmethod
    def folder(cls) -> str:
        """An empty root-owned folder, made once per process, that `_enter.py` mounts a tmpfs on."""
        if cls._folder is None:
            cls._folder = tempfile.mkdtemp(prefix="gyre-sandbox-stage-")
            os.chmod(cls._folder, 0o755)
            atexit.register(shutil.rmtree, cls._folder, True)
        return cls._folder


def _user_process_count(uid: int) -> int:
    count = 0
    for pid in proctree.parent_map():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += 1
        except OSError:
            pass
    return count


def _python_paths() -> list[str]:
    """Folders the running Python needs (venv, base install, and where the executable really lives)."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    result: list[str] = []
    for path in candidates + [os.path.realpath(p) for p in candidates]:
        path = os.path.abspath(path)
        if path in ("/", "/usr") or path.startswith("/usr/"):
            continue  # already visible through the /usr bind
        if any(path == kept or path.startswith(kept + "/") for kept in result):
            continue
        result = [kept for kept in result if not kept.startswith(path + "/")] + [path]
    return result


def bwrap_problem(uid: int = DEFAULT_UID, gid: int = DEFAULT_GID) -> str | None:
    """None when bubblewrap can run a sandbox here, else why not (cached per process and user). When Gyre
    runs as root, bwrap is started as ``uid``:``gid`` (see `_enter.py`): that needs unprivileged user
    namespaces, which some kernels turn off."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bwrap not found on PATH"
    root = os.geteuid() == 0
    key = f"{exe}:{uid}:{gid}" if root else exe
    if key in _BWRAP_PROBE:
        return _BWRAP_PROBE[key]
    probe_dir = tempfile.mkdtemp(prefix="gyre-bwrap-probe-")
    stage = _Stage(root)
    args = ["--die-with-parent", "--unshare-all", "--unshare-user", "--ro-bind", "/usr", "/usr"]
    for name in TOP_LEVEL_SYSTEM:
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
    args += ["--bind", stage.path(probe_dir), probe_dir, "--", "/bin/sh", "-c", "true"]
    if root:
        os.chown(probe_dir, uid, gid)
    try:
        done = subprocess.run([*stage.enter(uid, gid), exe, *args] if root else [exe, *args],
                              capture_output=True, timeout=20, check=False)
        problem = (
            None
            if done.returncode == 0
            else (done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}")
        )
        if problem is not None and root:
            problem = f"started as uid {uid} (Gyre never runs sandboxes as root): {problem}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    _BWRAP_PROBE[key] = problem
    return problem
