import os
import stat
import subprocess
import sys
from pathlib import Path

import re
from collections import Counter


def test_top3():
    counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", Path("text.txt").read_text()))
    expected = [f"{w} {c}" for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    assert Path("top3.txt").read_text().splitlines() == expected
