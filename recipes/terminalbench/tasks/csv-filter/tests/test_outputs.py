import os
import stat
import subprocess
import sys
from pathlib import Path

def test_filtered():
    lines = Path("people.csv").read_text().splitlines()
    expected = [lines[0]] + [row for row in lines[1:] if int(row.split(",")[1]) >= 30]
    assert Path("adults.csv").read_text().splitlines() == expected
