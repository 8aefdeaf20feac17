import os
import stat
import subprocess
import sys
from pathlib import Path

def test_join():
    names = dict(line.split() for line in Path("ids.txt").read_text().splitlines())
    scores = dict(line.split() for line in Path("scores.txt").read_text().splitlines())
    expected = [f"{i} {names[i]} {scores[i]}" for i in sorted(set(names) & set(scores))]
    assert Path("joined.txt").read_text().splitlines() == expected
