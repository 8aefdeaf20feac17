"""The cells' role timeline of a run, kept on disk so that a resumed run plots the whole run.

``<run_dir>/timeline.jsonl`` is append-only. Each process of the run (the first, and each resume) is a
*session*; it appends every role change as ``{"session": n, "cell": id, "role": name, "time": t}`` and, at
each plot, a sign of life ``{"session": n, "seen": true, "time": t}``. Times are wall-clock seconds (the
membership record keeps monotonic time, which does not carry across processes). When plotting, a session's cells
end at its last sign of life; the gap until the next session is drawn empty and the resume is marked.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

STOPPED = "stopped"  # the pseudo-role of the gap between a session's end and the next one's start


class TimelineLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.session = 0
        self._written: dict[str, int] = {}  # role changes of each cell already appended
        self._wall_offset = time.time() - time.monotonic()

    def start(self, keep: bool) -> None:
        """Begin this process's session: after the earlier sessions when ``keep`` (a resumed run), else on
        an empty file (a fresh run in a used folder does not inherit its roles)."""
        if not keep:
            self.path.unlink(missing_ok=True)
        self.session = 1 + max((row["session"] for row in self._rows()), default=-1)

    def record(self, timelines: dict[str, list[tuple[float, str]]], *, seen: bool = False) -> None:
        """Append the role changes not written yet of ``timelines`` (cell id -> ``[(monotonic time, role
        name), ...]``, as ``Membership.timeline`` keeps them)."""
        rows = []
        for cell, timeline in timelines.items():
            new = timeline[self._written.get(cell, 0):]
            rows += [{"session": self.session, "cell": cell, "role": role, "time": at + self._wall_offset}
                     for at, role in new]
            self._written[cell] = len(timeline)
        if seen:
            rows.append({"session": self.session, "seen": True, "time": time.time()})
        if rows:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as file:
                file.writelines(json.dumps(row) + "\n" for row in rows)

    def load(self) -> tuple[dict[str, list[tuple[float, str]]], list[float]]:
        """(every cell's ``[(start time, role), ...]`` over all sessions, the times of the resumes)."""
        sessions: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in self._rows():
            sessions[row["session"]].append(row)
        timelines: dict[str, list[tuple[float, str]]] = defaultdict(list)
        resumes: list[float] = []
        for index, session in enumerate(sorted(sessions)):
            rows = sessions[session]
            if index:
                resumes.append(min(row["time"] for row in rows))
            for row in rows:
                if "cell" in row:
                    timelines[row["cell"]].append((row["time"], row["role"]))
            if index < len(sessions) - 1:  # a later session follows: this one's cells stop at its last sign of life
                end = max(row["time"] for row in rows)
                for cell in {row["cell"] for row in rows if "cell" in row}:
                    timelines[cell].append((end, STOPPED))
        return {cell: sorted(events) for cell, events in timelines.items()}, resumes

    def _rows(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a killed process
        return rows
