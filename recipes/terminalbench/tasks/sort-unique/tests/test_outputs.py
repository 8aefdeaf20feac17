import os
import stat
import subprocess
import sys
from pathlib import Path

def test_sorted_unique():
    names = Path("names.txt").read_text().split()
    assert Path("sorted.txt").read_text().split("\n")[:-1] == sorted(set(names))


def test_trailing_newline():
    assert Path("sorted.txt").read_text().endswith("\n")
