import os
import stat
import subprocess
import sys
from pathlib import Path

def test_unique_in_order():
    lines = Path("items.txt").read_text().splitlines()
    assert Path("unique.txt").read_text().splitlines() == list(dict.fromkeys(lines))
