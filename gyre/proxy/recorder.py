"""Durable per-execution call logs: ``<run_dir>/records/<execution_id>.jsonl``, one CallRecord per line.

A call's record is written and flushed to the OS before its response goes back to the harness, so a
driver crash never loses a call the harness saw; it is fsync'd right after, or before the response too
with ``fsync_before_response`` (then it also survives a machine crash, for ~0.5 ms more per call).
One writer thread does the serialisation and file I/O so the event loop never blocks on a disk; it
commits whatever has queued up in one pass (group commit: one flush and one fsync per touched file per
pass), which keeps the cost per call small under hundreds of concurrent sessions. Records are handed
over as objects and must not be mutated afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import fields
from pathlib import Path
from typing import IO

from gyre.protocol import CallRecord

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@+=\-]{1,200}$")


def check_execution_id(execution_id: str) -> str:
    """Execution ids name files: refuse anything that could escape the records folder."""
    if not isinstance(execution_id, str) or not _SAFE_ID.match(execution_id) or execution_id in {".", ".."}:
        raise ValueError(
            f"execution id {execution_id!r} must be 1-200 characters of letters, digits and _ . : @ + = -"
        )
    return execution_id


def encode(record: CallRecord) -> str:
    """One JSON line. Serialised on the writer thread, field by field (``asdict`` deep-copies every token
    list, which costs more than the write itself)."""
    return json.dumps({f.name: getattr(record, f.name) for f in fields(record)}, separators=(",", ":"))


class RecordWriter:
    """Appends records durably from a background thread; ``write`` resolves once the line is on disk."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        fsync: bool = True,
        fsync_before_response: bool = False,
        max_open_files: int = 256,
    ) -> None:
        self.folder = Path(run_dir) / "records"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.fsync_before_response = fsync_before_response and fsync
        self.max_open_files = max_open_files
        self._queue: queue.Queue[tuple[str, CallRecord, Future[None]] | None] = queue.Queue()
        self._files: OrderedDict[str, IO[str]] = OrderedDict()
        self._thread = threading.Thread(target=self._run, name="gyre-record-writer", daemon=True)
        self._closed = False
        self.written = 0
        self._thread.start()

    def path(self, execution_id: str) -> Path:
        return self.folder / f"{check_execution_id(execution_id)}.jsonl"

    def submit(self, record: CallRecord) -> Future[None]:
        """Queue ``record``; the returned future completes when it is durable (or fails with the I/O error)."""
        if self._closed:
            raise RuntimeError("the record writer is closed")
        future: Future[None] = Future()
        self._queue.put((check_execution_id(record.execution_id), record, future))
        return future

    async def write(self, record: CallRecord) -> None:
        await asyncio.wrap_future(self.submit(record))

    def read(self, execution_id: str) -> list[CallRecord]:
        """Every record of ``execution_id`` on disk, in completion order (a torn last line is skipped)."""
        path = self.path(execution_id)
        if not path.exists():
            return []
        records = []
        with path.open() as handle:
            for line in handle:
                if line.endswith("\n"):
                    records.append(CallRecord.from_dict(json.loads(line)))
        return records

    def close(self) -> None:
        """Write what is queued, then stop the thread and close the files."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join()

    def _handle(self, execution_id: str) -> IO[str]:
        handle = self._files.get(execution_id)
        if handle is None:
            handle = (self.folder / f"{execution_id}.jsonl").open("a", encoding="utf-8")
            self._files[execution_id] = handle
            while len(self._files) > self.max_open_files:
                _, old = self._files.popitem(last=False)
                old.close()
        else:
            self._files.move_to_end(execution_id)
        return handle

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            items = [item for item in batch if item is not None]
            stopping = len(items) != len(batch)
            self._commit(items)
        for handle in self._files.values():
            handle.close()
        self._files.clear()

    def _commit(self, items: list[tuple[str, CallRecord, Future[None]]]) -> None:
        touched: dict[str, list[Future[None]]] = {}
        failed: dict[str, BaseException] = {}
        for execution_id, record, future in items:
            touched.setdefault(execution_id, []).append(future)
            if execution_id in failed:
                continue
            try:
                self._handle(execution_id).write(encode(record) + "\n")
            except (OSError, TypeError, ValueError) as error:
                failed[execution_id] = error
        for execution_id, futures in touched.items():  # flushed: in the OS, safe if this process dies
            error = failed.get(execution_id)
            if error is None:
                try:
                    self._handle(execution_id).flush()
                    self.written += len(futures)
                except OSError as exc:
                    failed[execution_id] = error = exc
            if error is not None or not self.fsync_before_response:
                self._resolve(futures, error)
        if not self.fsync:
            return
        for execution_id, futures in touched.items():  # fsync'd: safe if the machine dies
            if execution_id in failed:
                continue
            error = None
            try:
                os.fsync(self._handle(execution_id).fileno())
            except OSError as exc:
                error = exc
            if self.fsync_before_response:
                self._resolve(futures, error)

    @staticmethod
    def _resolve(futures: list[Future[None]], error: BaseException | None) -> None:
        for future in futures:
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
