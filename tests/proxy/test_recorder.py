"""The durable call log: every record lands once, whatever path (inline or writer thread) it took; delta lines
read back as full records; a truncated file gives back every complete record and names the broken line."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from gyre.chat.tokens import TokenSeq
from gyre.protocol import CallRecord
from gyre.proxy.recorder import RecordWriter, check_execution_id, read_record_file


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


def chain_records(execution_id: str, calls: int, new_tokens: int, seed: int = 0) -> list[CallRecord]:
    """Records as the proxy makes them: each prompt extends the previous call's prompt + response."""
    rng = np.random.default_rng(seed)
    records, previous = [], None
    for index in range(calls):
        new = rng.integers(16, 2000, new_tokens).tolist()
        prompt = TokenSeq.of(new) if previous is None else previous.extend(new)
        response = rng.integers(16, 2000, 8).tolist()
        records.append(CallRecord(execution_id, f"c{index}", "main", prompt, response, (-rng.random(8)).tolist(), 0))
        previous = prompt.extend(response, label=f"c{index}")
    return records


def write_all(writer: RecordWriter, records: list[CallRecord]) -> None:
    async def run() -> None:
        for record in records:  # in order, as a harness's calls complete
            await writer.write(record)

    asyncio.run(run())


def test_delta_records_round_trip_and_cost_bytes_per_new_token(tmp_path: Path) -> None:
    writer = RecordWriter(tmp_path, fsync=False)
    records = chain_records("e", calls=30, new_tokens=400)
    root = records[0].prompt_ids.extend(records[0].response_ids, label="c0")
    # A retry (a second child of c0), a sub-agent's fresh prompt, a huge extension (the writer thread's
    # path) and a prompt continuing a call this file never saw (written in full).
    records += [
        CallRecord("e", "retry", "main", root.extend([5, 6]), [7], [-0.5], 1),
        CallRecord("e", "sub", "sub", TokenSeq.of([9, 10, 11]), [12], [-0.25], 1),
        CallRecord("e", "huge", "main", records[-1].prompt_ids.extend(records[-1].response_ids, label="c29")
                   .extend([3] * RecordWriter.INLINE_TOKENS), [4], [-1.0], 1),
        CallRecord("e", "orphan", "main", TokenSeq.of([1, 2]).extend([3], label="elsewhere").extend([4]), [5], [-2.0],
                   1),
    ]
    write_all(writer, records)
    writer.close()
    lines = [json.loads(line) for line in writer.path("e").read_text().splitlines()]
    assert "prompt_ids" in lines[0] and "prompt_delta" not in lines[0]
    assert all(line["prompt_delta"]["parent"] == f"c{i}" for i, line in enumerate(lines[1:30]))
    assert lines[30]["prompt_delta"]["parent"] == "c0" and lines[32]["prompt_delta"]["parent"] == "c29"
    assert "prompt_ids" in lines[31] and "prompt_ids" in lines[33]
    read = read_record_file(writer.path("e"))
    assert read == records  # full CallRecords, plain lists, exactly what was written
    assert all(isinstance(record.prompt_ids, list) for record in read)
    assert read[29].prompt_ids[: len(read[28].prompt_ids)] == read[28].prompt_ids
    chain_bytes = sum(len(json.dumps(line, separators=(",", ":"))) + 1 for line in lines[:30])
    new_tokens = sum(400 + 8 for _ in range(30))
    assert chain_bytes / new_tokens <= 16  # grows with new tokens, not with calls x context
    full_bytes = sum(len(json.dumps(r.prompt_ids + r.response_ids)) for r in read[:30])
    assert chain_bytes < full_bytes / 5


def test_truncated_file_reads_every_complete_record_and_names_the_broken_line(tmp_path: Path, caplog) -> None:
    writer = RecordWriter(tmp_path, fsync=False)
    records = chain_records("t", calls=5, new_tokens=50)
    write_all(writer, records)
    writer.close()
    path = writer.path("t")
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 40])  # a crash 40 bytes into line 5
    with caplog.at_level(logging.WARNING):
        assert read_record_file(path) == records[:4]
    assert f"{path}:5: incomplete last line" in caplog.text
    errors: list[str] = []
    assert read_record_file(path, errors) == records[:4]
    assert errors == [f"{path}:5: incomplete last line (the write was cut off)"]
    assert RecordWriter(tmp_path, fsync=False).read("t") == records[:4]  # a live reader: a write in progress
    assert RecordWriter(tmp_path, fsync=False).count("t") == 4 and RecordWriter(tmp_path, fsync=False).count("x") == 0
    # A damaged line in the middle: the line after it continues it, so both are reported by line.
    lines = data.decode().splitlines(keepends=True)
    lines[2] = "{not json\n"
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=f"{path}:3: not a call record"):
        read_record_file(path)
    errors = []
    assert read_record_file(path, errors) == records[:2]
    assert [e.split(": ")[0] for e in errors] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert "continues call 'c2', which no earlier line of the file holds" in errors[1]
