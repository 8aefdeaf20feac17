import os
import stat
import subprocess
import sys
from pathlib import Path

def test_executable():
    assert os.access("run.sh", os.X_OK)


def test_output():
    assert Path("output.txt").read_text() == "ready\n"
