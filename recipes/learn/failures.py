"""What the policy got wrong on the learn suite, per validation (or per stretch of training steps).

    python recipes/learn/failures.py runs/<run> [--split heldout|train] [--every 8] [--suite recipes/learn/tasks]

Reads a finished run's folder (``executions/<id>/workspace`` as the agent left it, ``records/<id>.jsonl`` for
the weight version that made each execution's first call) and the suite's task folders, and counts each
execution under one outcome: ``pass``, or the mistake that cost it credit:

- ``outdated``: a file holds the outdated value the instruction names (a demonstrator mistake);
- ``stopped_early``: write2 with the first file right and the second never written (a demonstrator mistake);
- ``source_changed``: copy that overwrote the source (a demonstrator mistake);
- ``wrong_name``: a file written under a name the instruction does not give (a path copied wrongly);
- ``garbled_value``: a file with content that is neither the new nor the outdated value (copied wrongly);
- ``missing``: an expected file never written; ``no_write``: copy with nothing written.

The demonstrator's mistakes are what RL should remove through the reward; the copying errors measure how
well the policy copies strings it has not seen.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "tasks"
CHECK_FILE = "check_task.py"


def outcome(task: Path, workspace: Path) -> str:
    family = task.name.split("-")[1]
    expected = {p.name: p.read_text().strip() for p in sorted((task / "reference").iterdir())}
    found = {p.name: p.read_text().strip() for p in workspace.iterdir() if p.is_file() and p.name != CHECK_FILE}
    wrong = [name for name, content in expected.items() if found.get(name) != content]
    if not wrong:
        return "pass"
    extra = set(found) - set(expected)
    if family == "copy":
        source = next(p.name for p in (task / "workspace").iterdir())
        if source in wrong:
            return "source_changed"
        return "wrong_name" if extra else ("no_write" if set(found) == {source} else "garbled_value")
    outdated = set(re.findall(r'outdated "([^"]+)"', (task / "start.md").read_text()))
    kinds = {"missing" if name not in found else "outdated" if found[name] in outdated else "garbled_value"
             for name in wrong}
    if family == "write2" and kinds == {"missing"} and len(wrong) == 1 and not extra:
        return "stopped_early"
    return "+".join(sorted(kinds | ({"wrong_name"} if extra else set())))


def first_version(records: Path) -> int | None:
    try:
        with records.open() as handle:
            return int(json.loads(handle.readline())["weight_version"])
    except (OSError, ValueError, KeyError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run folder of +recipe=learn")
    parser.add_argument("--split", choices=["heldout", "train"], default="heldout")
    parser.add_argument("--every", type=int, default=8, help="versions per row (trainer.val_every for held-out)")
    parser.add_argument("--suite", type=Path, default=SUITE,
                        help="the suite the run used: a folder of train/ and heldout/ (default: the recipe's)")
    args = parser.parse_args()
    rows: dict[int, Counter] = defaultdict(Counter)
    for execution in sorted((args.run / "executions").glob(f"{args.split}-*")):
        version = first_version(args.run / "records" / f"{execution.name}.jsonl")
        task = args.suite / args.split / "-".join(execution.name.split("-")[:3])
        if version is None or not task.is_dir():
            continue  # no call made, or not a task of this suite
        family = task.name.split("-")[1]
        rows[version // args.every * args.every][f"{family}:{outcome(task, execution / 'workspace')}"] += 1
    for version, counts in sorted(rows.items()):
        total = sum(counts.values())
        passed = sum(n for key, n in counts.items() if key.endswith(":pass"))
        print(f"versions {version}-{version + args.every - 1}: {total} executions, pass rate {passed / total:.3f}")
        for key, n in sorted(counts.items(), key=lambda item: -item[1]):
            print(f"  {key:40s} {n:4d}")


if __name__ == "__main__":
    main()
