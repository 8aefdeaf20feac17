"""Durable per-execution call logs: ``<run_dir>/records/<execution_id>.jsonl``, one CallRecord per line.

The line format is ``gyre.proxy.record_format``: a call whose prompt continues an earlier call of the file
is written as that call's id plus the new tokens, so an execution's log grows with its new tokens. Read a
file back with ``read_record_file`` (full ``CallRecord``s).

A call's record is written to the OS before its response goes back to the harness, so a driver crash
never loses a call the harness saw; it is fsync'd within ``fsync_interval_s`` by a writer thread (group
commit: one fsync per touched file per interval, however many calls landed in it; waking the thread and
syncing once per call cost about half a millisecond of every call's latency), or before the response
with ``fsync_before_response`` (then it also survives a machine crash, for ~0.5 ms more per call).
Records are handed over as objects and must not be mutated afterwards.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path

from gyre.protocol import CallRecord
from gyre.proxy.record_format import (
    delta_parent,
    encode_record,
    encoded_tokens,
    read_live_record_file,
    read_record_file,
)

__all__ = ["RecordWriter", "check_execution_id", "read_record_file"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@+=\-]{1,200}$")


def check_execution_id(execution_id: str) -> str:
    """Execution ids name files: refuse anything that could escape the records folder."""
    if not isinstance(execution_id, str) or not _SAFE_ID.match(execution_id) or execution_id in {".", ".."}:
        raise ValueError(
            f"execution id {execution_id!r} must be 1-200 characters of letters, digits and _ . : @ + = -"
        )
    return execution_id


class RecordWriter:
    """Appends records durably; ``write`` resolves once the record's line is in the OS (or on disk).

    Files are opened ``O_APPEND`` and each record is one ``os.write`` of its whole line, so writes from
    the event loop and from the writer thread never interleave. Small records (the common case) are
    written on the caller's thread (tens of microseconds; no thread round trip on the call path); large
    ones (long prompts: megabytes of JSON) and every fsync go to the writer thread.
    """

    INLINE_TOKENS = 16_384  # records whose line carries fewer token ids are written inline
    TRACKED_EXECUTIONS = 4096  # executions whose written calls are remembered for delta lines (LRU)

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        fsync: bool = True,
        fsync_before_response: bool = False,
        fsync_interval_s: float = 0.05,
        max_open_files: int = 256,
    ) -> None:
        if fsync_interval_s < 0:
            raise ValueError(f"fsync_interval_s must be >= 0, got {fsync_interval_s}")
        self.folder = Path(run_dir) / "records"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.fsync_before_response = fsync_before_response and fsync
        self.fsync_interval_s = fsync_interval_s
        self.max_open_files = max_open_files
        self._unsynced: set[str] = set()  # executions with a sync queued and not yet done (under _lock)
        self._urgent = threading.Event()  # set when a queued item has a caller waiting on it
        self._queue: queue.Queue[tuple[str, str, CallRecord | None, Future[None] | None] | None] = queue.Queue()
        self._fds: OrderedDict[str, int] = OrderedDict()
        # Per execution: call id -> prompt + response length of each call whose line is in the file.
        self._in_file: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._lock = threading.Lock()  # guards the fd table and each write
        self._thread = threading.Thread(target=self._run, name="gyre-record-writer", daemon=True)
        self._closed = False
        self.written = 0
        self._thread.start()

    def path(self, execution_id: str) -> Path:
        return self.folder / f"{check_execution_id(execution_id)}.jsonl"

    def submit(self, record: CallRecord) -> Future[None]:
        """Write ``record``; the returned future completes when it is in the OS (with
        ``fsync_before_response``: on disk), or fails with the error."""
        if self._closed:
            raise RuntimeError("the record writer is closed")
        execution_id = check_execution_id(record.execution_id)
        future: Future[None] = Future()
        if encoded_tokens(record, self._can_delta(execution_id, record)) >= self.INLINE_TOKENS:
            self._queue.put(("write", execution_id, record, future))
            self._urgent.set()
            return future
        try:
            self._append(execution_id, record)
        except (OSError, TypeError, ValueError) as error:
            future.set_exception(error)
            return future
        if self.fsync_before_response:
            self._queue.put(("sync", execution_id, None, future))
            self._urgent.set()
        else:
            future.set_result(None)
            if self.fsync:
                with self._lock:  # one queued sync per file at a time: later records ride on it
                    queued = execution_id in self._unsynced
                    self._unsynced.add(execution_id)
                if not queued:
                    self._queue.put(("sync", execution_id, None, None))
        return future

    async def write(self, record: CallRecord) -> None:
        future = self.submit(record)
        if not future.done():
            await asyncio.wrap_future(future)
        else:
            future.result()

    def read(self, execution_id: str) -> list[CallRecord]:
        """Every record of ``execution_id`` on disk, in completion order (an incomplete last line, a write
        in progress, is skipped)."""
        path = self.path(execution_id)
        return read_live_record_file(path) if path.exists() else []

    def count(self, execution_id: str) -> int:
        """How many records of ``execution_id`` are complete on disk, without decoding them (a poll that
        ``len(read(...))`` would make cost the execution's whole context per call)."""
        path = self.path(execution_id)
        if not path.exists():
            return 0
        with path.open("rb") as handle:
            return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))

    def close(self) -> None:
        """Write and sync what is queued, then stop the thread and close the files."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._urgent.set()
        self._thread.join()
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def _can_delta(self, execution_id: str, record: CallRecord) -> bool:
        """True if the record's prompt continues a call whose line is already in this execution's file."""
        parent = delta_parent(record)
        if parent is None:
            return False
        with self._lock:
            return self._in_file.get(execution_id, {}).get(parent[0]) == parent[1]

    def _append(self, execution_id: str, record: CallRecord) -> None:
        line = encode_record(record, as_delta=self._can_delta(execution_id, record))
        data = (line + "\n").encode()
        with self._lock:
            fd = self._fds.get(execution_id)
            if fd is None:
                fd = os.open(self.folder / f"{execution_id}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                self._fds[execution_id] = fd
                while len(self._fds) > self.max_open_files:
                    _, old = self._fds.popitem(last=False)
                    os.close(old)  # its data is in the OS; the writer thread's queued fsync skips it
            else:
                self._fds.move_to_end(execution_id)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            self.written += 1
            calls = self._in_file.setdefault(execution_id, {})
            self._in_file.move_to_end(execution_id)
            calls[record.call_id] = len(record.prompt_ids) + len(record.response_ids)
            while len(self._in_file) > self.TRACKED_EXECUTIONS:
                self._in_file.popitem(last=False)  # its later calls are written in full (still exact)

    def _sync(self, execution_id: str) -> None:
        """fsync the execution's file without holding the lock (inline writes must not wait for a disk):
        a duplicate descriptor stays valid even if the table's one is evicted meanwhile."""
        with self._lock:
            self._unsynced.discard(execution_id)  # records written from here on queue a new sync
            fd = self._fds.get(execution_id)
            fd = os.dup(fd) if fd is not None else None
        if fd is None:  # evicted: reopen to sync what was written
            path = self.folder / f"{execution_id}.jsonl"
            if not path.exists():
                return
            fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _run(self) -> None:
        stopping = False
        last_commit = 0.0
        while not stopping:
            batch = [self._queue.get()]
            urgent = batch[0] is None or batch[0][3] is not None  # someone waits on it (or closing)
            pause = last_commit + self.fsync_interval_s - time.monotonic()
            if not urgent and pause > 0:
                # Gather the interval's records into one fsync per file; a caller waiting on the writer
                # (a large record, fsync_before_response, close) cuts the pause short.
                self._urgent.wait(pause)
            self._urgent.clear()
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            items = [item for item in batch if item is not None]
            stopping = len(items) != len(batch)
            self._commit(items)
            last_commit = time.monotonic()

    def _commit(self, items: list[tuple[str, str, CallRecord | None, Future[None] | None]]) -> None:
        """Write the queued large records, then fsync every touched file once (group commit)."""
        waiting: dict[str, list[Future[None]]] = {}
        failed: dict[str, BaseException] = {}
        for kind, execution_id, record, future in items:
            if kind == "write" and record is not None and execution_id not in failed:
                try:
                    self._append(execution_id, record)
                except (OSError, TypeError, ValueError) as error:
                    failed[execution_id] = error
            if future is None:
                waiting.setdefault(execution_id, [])
            elif kind == "write" and not self.fsync_before_response:
                self._resolve([future], failed.get(execution_id))
                waiting.setdefault(execution_id, [])
            else:
                waiting.setdefault(execution_id, []).append(future)
        for execution_id, futures in waiting.items():
            error = failed.get(execution_id)
            if error is None and self.fsync:
                try:
                    self._sync(execution_id)
                except OSError as exc:
                    error = exc
            self._resolve(futures, error)

    @staticmethod
    def _resolve(futures: list[Future[None]], error: BaseException | None) -> None:
        for future in futures:
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
