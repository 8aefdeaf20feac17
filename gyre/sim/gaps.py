"""Tool gaps of recorded executions: what an agent session does between its model calls, for the simulator.

    python -m gyre.sim.gaps RUN/records --out conf/sim/tool_gaps_NAME.jsonl

The proxy records every model call with its timings (``gyre.proxy.service``: ``completed_at`` and
``proxy_total_s``, so each call's start and end). A session's tool gap is the time from one call's end to
the next call's start: tool runs, the harness's own work, anything but the model. Every session (a
sub-agent is its own session) becomes one line ``{"gaps": [s, ...]}`` in call order; the simulator replays
them as per-call tool times (``sim.workload.tool_gaps``), keeping their spread, their tail and how each
session's gaps follow one another (which the park rule predicts from), scaled to the preset's mean.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import numpy as np

from gyre.sim.config import CONF_DIR, ConfigError


def session_gaps(records_dir: str | Path) -> list[list[float]]:
    """Each session's tool gaps in call order, from a folder of the proxy's record files (sessions with a
    single call have none and are left out). Records without timings are skipped."""
    from gyre.proxy.record_format import read_record_file

    folder = Path(records_dir)
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise ValueError(f"{folder}: no record files (*.jsonl)")
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for path in files:
        for record in read_record_file(path, errors=[]):
            end = record.timings.get("completed_at")
            took = record.timings.get("proxy_total_s", record.timings.get("total_s"))
            if end is None or took is None:
                continue
            session = str(record.meta.get("session_id") or record.execution_id)
            spans[session].append((end - took, end))
    sessions = []
    for calls in spans.values():
        calls.sort()
        gaps = [max(0.0, nxt[0] - cur[1]) for cur, nxt in pairwise(calls)]
        if gaps:
            sessions.append(gaps)
    if not sessions:
        raise ValueError(f"{folder}: no session with two timed calls (records need timings.completed_at)")
    return sessions


def write_gaps(sessions: list[list[float]], path: str | Path) -> None:
    Path(path).write_text("".join(json.dumps({"gaps": [round(g, 6) for g in gaps]}) + "\n" for gaps in sessions))


def resolve(path: str | Path) -> Path:
    """As given, or, when relative and not found there, relative to ``conf/sim/``."""
    path = Path(path)
    if path.is_file() or path.is_absolute():
        return path
    beside = CONF_DIR / "sim" / path
    return beside if beside.is_file() else path


def read_gaps(path: str | Path) -> list[np.ndarray]:
    """The recorded sessions' gaps (``sim.workload.tool_gaps``); errors name the line and the field."""
    path = resolve(path)
    if not path.is_file():
        raise ConfigError(f"sim.workload.tool_gaps: no such file {str(path)!r} (relative paths: from the current "
                          "folder, then conf/sim/)")
    sessions = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            gaps = json.loads(line).get("gaps")
        except (json.JSONDecodeError, AttributeError) as exc:
            raise ConfigError(f"{where}: not a JSON object with 'gaps'") from exc
        if not isinstance(gaps, list) or not gaps or not all(isinstance(g, (int, float)) and g >= 0 for g in gaps):
            raise ConfigError(f"{where}: field 'gaps' must be a non-empty list of seconds >= 0")
        sessions.append(np.asarray(gaps, dtype=float))
    if not sessions or not sum(float(s.sum()) for s in sessions) > 0:
        raise ConfigError(f"sim.workload.tool_gaps: {str(path)!r} holds no gaps (or only zeros)")
    return sessions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", help="a run's records folder (RUN/records)")
    parser.add_argument("--out", required=True, help="jsonl to write, one session's gaps a line")
    args = parser.parse_args(argv)
    sessions = session_gaps(args.records)
    write_gaps(sessions, args.out)
    flat = np.concatenate([np.asarray(s) for s in sessions])
    print(f"wrote {args.out}: {len(sessions)} sessions, {len(flat)} gaps, mean {flat.mean():.3f} s, "
          f"p50 {np.median(flat):.3f} s, p90 {np.percentile(flat, 90):.3f} s, max {flat.max():.3f} s")


if __name__ == "__main__":
    main()
