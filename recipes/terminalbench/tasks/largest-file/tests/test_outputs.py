import os
import stat
import subprocess
import sys
from pathlib import Path

def test_largest():
    assert Path("largest.txt").read_text().strip() == "huge.dat"
