import os
import stat
import subprocess
import sys
from pathlib import Path

from collections import Counter


def test_counts():
    counts = Counter(line.split()[0] for line in Path("access.log").read_text().splitlines())
    expected = [f"{ip} {n}" for ip, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert Path("ip_counts.txt").read_text().splitlines() == expected
