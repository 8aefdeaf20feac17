import os
import stat
import subprocess
import sys
from pathlib import Path

def test_report():
    assert Path("report.txt").read_text().splitlines() == ["md 1", "py 3", "txt 3"]
