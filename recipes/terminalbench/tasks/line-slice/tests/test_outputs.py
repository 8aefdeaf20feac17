import os
import stat
import subprocess
import sys
from pathlib import Path

def test_slice():
    assert Path("slice.txt").read_text().splitlines() == Path("server.log").read_text().splitlines()[10:20]
