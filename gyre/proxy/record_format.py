"""The record file format: one JSON object per line, one ``CallRecord`` each, in completion order.

A line holds the record's fields. A call whose prompt continues an earlier call of the same file (its
prompt + response, then new tokens: what the proxy's prompt planning produces) is written as a delta,
``"prompt_delta": {"parent": <call_id>, "reused": <parent prompt + response length>, "ids": [new ids]}``,
in place of ``prompt_ids``; so a file grows with the execution's new tokens, not with calls times context.
The writer uses a delta only once the parent's line is in the file, so every delta's parent comes before
it. Reading gives the full records back (``read_record_file``).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from gyre.chat.tokens import TokenSeq
from gyre.protocol import CallRecord

log = logging.getLogger(__name__)

DELTA_KEY = "prompt_delta"
_FIELDS = tuple(f.name for f in fields(CallRecord))


def delta_parent(record: CallRecord) -> tuple[str, int] | None:
    """(parent call id, parent prompt + response length) when the record's prompt is a ``TokenSeq`` that
    extends the labelled tokens of an earlier call, else None."""
    prompt = record.prompt_ids
    if isinstance(prompt, TokenSeq) and prompt.parent is not None and prompt.parent.label:
        return prompt.parent.label, prompt.parent.length
    return None


def encoded_tokens(record: CallRecord, as_delta: bool) -> int:
    """Token ids the record's line will carry."""
    prompt = record.prompt_ids
    prompt_tokens = int(prompt.own.shape[0]) if as_delta and isinstance(prompt, TokenSeq) else len(prompt)
    return prompt_tokens + len(record.response_ids)


def encode_record(record: CallRecord, as_delta: bool = False) -> str:
    """One JSON line (no newline). ``as_delta``: write the prompt as new tokens after its parent call's (the
    caller has made sure that call's line is already in the same file)."""
    data: dict[str, Any] = {name: getattr(record, name) for name in _FIELDS}
    prompt = record.prompt_ids
    parent = delta_parent(record) if as_delta else None
    if parent is not None:
        assert isinstance(prompt, TokenSeq)
        del data["prompt_ids"]
        data[DELTA_KEY] = {"parent": parent[0], "reused": parent[1], "ids": prompt.own.tolist()}
    elif isinstance(prompt, TokenSeq):
        data["prompt_ids"] = prompt.tolist()
    return json.dumps(data, separators=(",", ":"))


def decode_record(line: str, earlier: dict[str, CallRecord]) -> CallRecord:
    """The record on ``line``; a delta is resolved against ``earlier`` (records of the file so far by id)."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    delta = data.pop(DELTA_KEY, None)
    if delta is not None:
        if "prompt_ids" in data:
            raise ValueError(f"a record has either prompt_ids or {DELTA_KEY}, not both")
        parent = earlier.get(delta["parent"])
        if parent is None:
            raise ValueError(f"its prompt continues call {delta['parent']!r}, which no earlier line of the file holds")
        reused = len(parent.prompt_ids) + len(parent.response_ids)
        if reused != delta["reused"]:
            raise ValueError(
                f"its prompt continues {delta['reused']} tokens of call {delta['parent']!r}, which has {reused}"
            )
        data["prompt_ids"] = parent.prompt_ids + parent.response_ids + list(delta["ids"])
    return CallRecord.from_dict(data)


def read_record_file(path: str | os.PathLike[str], errors: list[str] | None = None) -> list[CallRecord]:
    """Every record of one execution's record file, in completion order, as full ``CallRecord``s.

    A torn last line (the one being written when a process died) is skipped with a warning naming it. A
    line that is not a valid record raises ``ValueError`` naming the file and line; with an ``errors``
    list it is skipped instead and its problem appended there (so is a torn last line, without a warning),
    for readers that keep what is readable. A record whose prompt continues a skipped one cannot be
    rebuilt and is reported the same way."""
    return _read(Path(path), errors, warn_torn=errors is None)


def read_live_record_file(path: Path) -> list[CallRecord]:
    """``read_record_file`` for a file still being appended to: an incomplete last line is a write in
    progress, skipped quietly; any other bad line raises."""
    problems: list[str] = []
    records = _read(path, problems, warn_torn=False)
    broken = [problem for problem in problems if not problem.endswith(_TORN)]
    if broken:
        raise ValueError(broken[0])
    return records


_TORN = "incomplete last line (the write was cut off)"


def _read(path: Path, errors: list[str] | None, warn_torn: bool) -> list[CallRecord]:
    records: list[CallRecord] = []
    by_id: dict[str, CallRecord] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith("\n"):
                message = f"{path}:{number}: {_TORN}"
                if warn_torn:
                    log.warning("%s; the %d complete records before it are read", message, len(records))
                if errors is not None:
                    errors.append(message)
                continue
            try:
                record = decode_record(line, by_id)
            except (ValueError, TypeError, KeyError) as error:  # bad JSON, missing/unknown fields, bad values
                message = f"{path}:{number}: not a call record ({type(error).__name__}: {error})"
                if errors is None:
                    raise ValueError(message) from error
                errors.append(message)
                continue
            records.append(record)
            by_id[record.call_id] = record
    return records
