"""Refresh ``tests/scope_seconds.json``: the seconds each scheduling scope took in a whole run, which
``tests/conftest.py`` hands out longest first (xdist gives a worker whole scopes; a long one handed out last
keeps one worker busy while the other idles).

    python -m pytest -q -n 2 --junitxml=junit.xml && python tests/scope_seconds.py junit.xml

(Not a test module: pytest collects ``test_*.py`` only.)
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import SCOPE_SECONDS, scheduling_scope  # noqa: E402


def node_id(case: ET.Element) -> str:
    """The pytest node id of a junit test case (its classname is the module path dotted, then any class)."""
    parts = case.get("classname", "").split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (ROOT / path).is_file():
            return "::".join([path, *parts[end:], case.get("name", "")])
    raise ValueError(f"no test file for junit classname {case.get('classname')!r}")


def main(junit: str) -> None:
    seconds: Counter[str] = Counter()
    for case in ET.parse(junit).iter("testcase"):
        seconds[scheduling_scope(node_id(case))] += float(case.get("time", 0.0))
    ranked = {scope: round(total, 1) for scope, total in seconds.most_common()}
    SCOPE_SECONDS.write_text(json.dumps(ranked, indent=1) + "\n")
    print(f"{len(ranked)} scopes, {sum(ranked.values()):.0f} s in all -> {SCOPE_SECONDS}")


if __name__ == "__main__":
    main(sys.argv[1])
