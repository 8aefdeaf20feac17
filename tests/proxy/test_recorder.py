"""The durable call log: every record lands once, whatever path (inline or writer thread) it took."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gyre.protocol import CallRecord
from gyre.proxy.recorder import RecordWriter, check_execution_id


@pytest.mark.parametrize("before_response", [False, True])
def test_all_records_land_once_across_paths_and_evictions(tmp_path: Path, before_response: bool) -> None:
    writer = RecordWriter(tmp_path, fsync_before_response=before_response, max_open_files=3)
    records = [
        CallRecord(f"e{i % 7}", f"c{i}", "main", [1] * (RecordWriter.INLINE_TOKENS if i % 17 == 0 else 10), [2, 3], [-1.0, -2.0], 0)
        for i in range(120)
    ]

    async def run() -> None:
        await asyncio.gather(*(writer.write(record) for record in records))

    asyncio.run(run())
    on_disk = {r.call_id: r for i in range(7) for r in writer.read(f"e{i}")}  # readable before close
    writer.close()
    assert sorted(on_disk) == sorted(r.call_id for r in records)
    assert on_disk["c17"] == records[17]  # a large record (writer thread) round-trips exactly


def test_torn_last_line_is_skipped_and_ids_are_checked(tmp_path: Path) -> None:
    writer = RecordWriter(tmp_path)
    asyncio.run(writer.write(CallRecord("e", "c0", "main", [1], [2], [-0.5], 3)))
    with writer.path("e").open("a") as handle:
        handle.write('{"execution_id": "e", "call_id": "c1"')  # a crash mid-line
    assert [r.call_id for r in writer.read("e")] == ["c0"]
    writer.close()
    for bad in ("../escape", "", "a/b", "x" * 300):
        with pytest.raises(ValueError, match="execution id"):
            check_execution_id(bad)


def test_fsync_is_group_committed_per_interval_and_never_delays_a_large_record(tmp_path: Path, monkeypatch) -> None:
    """Records of one interval share one fsync per file; a caller waiting on the writer does not sit out
    the interval; everything is synced by close."""
    import os
    import time

    synced: list[float] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(time.monotonic()), real_fsync(fd))[1])
    writer = RecordWriter(tmp_path, fsync_interval_s=0.5)

    async def run() -> float:
        for i in range(40):  # one execution, 40 calls in a burst: inline writes, one queued sync
            await writer.write(CallRecord("e", f"c{i}", "main", [1] * 10, [2], [-1.0], 0))
        started = time.monotonic()
        await writer.write(CallRecord("big", "b0", "main", [1] * RecordWriter.INLINE_TOKENS, [2], [-1.0], 0))
        return time.monotonic() - started

    large_wait = asyncio.run(run())
    assert large_wait < 0.3  # written at once, not after the 0.5 s pause
    time.sleep(0.8)
    assert 1 <= len(synced) <= 3, synced  # "e" and "big": not one fsync per call
    assert len(writer.read("e")) == 40
    writer.close()
    with pytest.raises(ValueError, match="fsync_interval_s"):
        RecordWriter(tmp_path, fsync_interval_s=-1)
