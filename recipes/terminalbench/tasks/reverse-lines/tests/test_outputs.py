import os
import stat
import subprocess
import sys
from pathlib import Path

def test_reversed():
    assert Path("reversed.txt").read_text().splitlines() == Path("lines.txt").read_text().splitlines()[::-1]
