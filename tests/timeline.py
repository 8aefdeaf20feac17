"""Where a test run's wall time went, from the records GYRE_TEST_TIMELINE=DIR made (tests/conftest.py).

    python tests/timeline.py DIR [--top 15]

Per worker: busy seconds, and the idle tail between its last test and the run's end; then the longest
scheduling scopes (a file, or a chain of documented commands), each with its worker and when it ran.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    records = {path.stem: [json.loads(line) for line in path.read_text().splitlines()]
               for path in sorted(args.folder.glob("*.jsonl"))}
    if not records:
        raise SystemExit(f"no timeline records in {args.folder}")
    start = min(r["start"] for rows in records.values() for r in rows)
    end = max(r["end"] for rows in records.values() for r in rows)
    console = Console()
    console.print(f"{sum(map(len, records.values()))} tests, {end - start:.0f} s from the first start to the last end")
    workers = Table("worker", "tests", "busy s", "idle tail s")
    for worker, rows in records.items():
        busy = sum(r["end"] - r["start"] for r in rows)
        workers.add_row(worker, str(len(rows)), f"{busy:.0f}", f"{end - max(r['end'] for r in rows):.0f}")
    console.print(workers)
    scopes: dict[tuple[str, str], list[float]] = defaultdict(lambda: [float("inf"), 0.0, 0.0])
    for worker, rows in records.items():
        for r in rows:
            span = scopes[(r["scope"], worker)]
            span[0], span[1] = min(span[0], r["start"]), max(span[1], r["end"])
            span[2] += r["end"] - r["start"]
    longest = Table("scope", "worker", "from s", "to s", "busy s", title=f"the {args.top} longest scopes")
    for (scope, worker), (first, last, busy) in sorted(scopes.items(), key=lambda kv: -kv[1][2])[: args.top]:
        longest.add_row(scope, worker, f"{first - start:.0f}", f"{last - start:.0f}", f"{busy:.0f}")
    console.print(longest)


if __name__ == "__main__":
    main()
