"""Run one long-lived sandboxed process under asyncio: wait for it, stop it when over a limit, keep its log.

The envs `Sandbox.run` waits for a command to finish; a harness instead runs for minutes or hours while
many others run beside it, so this module spawns the sandbox's prepared `Launch` itself with asyncio
(as `Launch` documents) and hands it back for limits and cleanup.

Stopping is graceful first: SIGTERM to every process of the tree (a CLI such as Claude Code can then
flush its state), then, after ``grace_s``, `Launch.kill` (SIGKILL of the whole sandbox: under bwrap the
pid namespace dies with it). Either way nothing is left running when `run_process` returns, even when
the awaiting task is cancelled.

Resource exhaustion ends the run at once (SIGKILL, no grace), named in ``stop_reason``: the sandbox's
watchdog kills the tree on ``max_processes``, ``memory`` (resident memory of the tree) or ``disk`` (its
writable folders), and an output flood past ``output_limit_bytes`` is ``output_limit`` (killed
at once, the sink keeping only the log's head and tail).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gyre.envs import proctree

if TYPE_CHECKING:
    from gyre.envs.sandbox import Launch

StopCheck = Callable[[], str | None]


@dataclass
class ProcessOutcome:
    """How the process ended. ``stop_reason``: ``exited`` (on its own) or the limit that stopped it
    (``time_limit``, ``max_calls``, ``output_limit``, ``max_processes``, ``memory``, ``disk``).
    ``returncode`` is negative for a signal, as in subprocess."""

    returncode: int
    stop_reason: str
    duration_s: float
    killed: bool = False  # SIGTERM was not enough: SIGKILL was needed
    log_truncated: bool = False


class LogSink:
    """Keeps at most ``cap`` bytes of a stream: the head in the file as it comes, the tail in memory,
    written after a marker at the end. Never silent about what it dropped."""

    def __init__(self, path: Path, cap: int) -> None:
        self.path = path
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.written = 0
        self.total = 0
        self.tail = bytearray()
        self.handle = path.open("wb")

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - self.written
        if room > 0:
            self.handle.write(data[:room])
            self.written += min(room, len(data))
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_cap + self.tail_cap

    def close(self) -> None:
        tail = bytes(self.tail[-self.tail_cap :])
        dropped = self.total - self.written - len(tail)
        if dropped > 0:
            self.handle.write(f"\n[... gyre: {dropped} bytes of harness output dropped (log_max_bytes) ...]\n".encode())
        self.handle.write(tail)
        self.handle.close()


async def run_process(
    launch: Launch,
    log_path: Path,
    *,
    deadline: float,
    should_stop: StopCheck,
    poll_s: float = 0.2,
    grace_s: float = 10.0,
    log_max_bytes: int = 20_000_000,
    output_limit_bytes: int | None = None,
) -> ProcessOutcome:
    """Start ``launch``, pump its stdout+stderr into ``log_path``, and stop it past ``deadline``
    (``time.monotonic()`` clock), when ``should_stop()`` names a reason, or on a resource limit."""
    start = time.monotonic()
    sink = LogSink(log_path, log_max_bytes)
    flooded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    proc: asyncio.subprocess.Process | None = None
    pump: asyncio.Future[None] | None = None
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            env=launch.env,
            cwd=launch.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=launch.preexec,
            pass_fds=launch.pass_fds,
        )
        launch.attach(proc.pid)
        assert proc.stdout is not None
        pump = asyncio.ensure_future(_pump(proc.stdout, sink, output_limit_bytes, flooded))
        waiter = asyncio.ensure_future(proc.wait())
        reason = "exited"
        while not waiter.done():
            now = time.monotonic()
            if now >= deadline:
                reason = "time_limit"
                break
            await asyncio.wait({waiter, flooded}, timeout=min(poll_s, deadline - now), return_when=asyncio.FIRST_COMPLETED)
            if flooded.done():
                reason = "output_limit"
                break
            if not waiter.done():
                reason = should_stop() or reason
                if reason != "exited":
                    break
        killed = False
        if not waiter.done():
            killed = await _stop(launch, waiter, 0.0 if reason == "output_limit" else grace_s)
        returncode = await waiter
        exhausted = launch.exhausted()
        if exhausted is not None and reason == "exited":
            reason, killed = exhausted, launch.limit_hit is not None  # a resource limit ended it
        await _finish_pump(pump)
        return ProcessOutcome(returncode, reason, time.monotonic() - start, killed, sink.truncated)
    finally:
        if proc is not None:
            if proc.returncode is None:  # cancelled (or failed) mid-run: kill, then reap without waiting long
                launch.kill()
                try:
                    await asyncio.wait_for(asyncio.shield(proc.wait()), 10.0)
                except (TimeoutError, asyncio.CancelledError):
                    pass
            if proc.returncode is not None:
                launch.exited()  # reaped: no signal goes to its (possibly reused) pid any more
        if pump is not None and not pump.done():
            pump.cancel()
        launch.close()
        sink.close()


async def _stop(launch: Launch, waiter: asyncio.Future[int], grace_s: float) -> bool:
    """SIGTERM the tree, wait ``grace_s``, then SIGKILL everything. True when SIGKILL was needed."""
    if launch.pid is not None and grace_s > 0:
        proctree.kill_pids([launch.pid] if launch.kind == "process" else [], signal.SIGTERM)  # the supervisor forwards it
        proctree.kill_pids(proctree.descendants(launch.pid), signal.SIGTERM)
        await asyncio.wait({waiter}, timeout=grace_s)
        if waiter.done():
            return False
    await asyncio.to_thread(launch.kill)
    return True


async def _pump(stream: asyncio.StreamReader, sink: LogSink, limit: int | None, flooded: asyncio.Future[None]) -> None:
    while True:
        data = await stream.read(65536)
        if not data:
            return
        sink.feed(data)
        if limit is not None and sink.total > limit and not flooded.done():
            flooded.set_result(None)  # keep reading until EOF: asyncio's wait() needs the pipe closed


async def _finish_pump(pump: asyncio.Future[None]) -> None:
    """Read what is left; a grandchild that escaped and still holds the pipe must not block us."""
    try:
        await asyncio.wait_for(pump, 2.0)
    except TimeoutError:
        pump.cancel()
