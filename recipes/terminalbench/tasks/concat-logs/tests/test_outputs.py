import os
import stat
import subprocess
import sys
from pathlib import Path

def test_concatenated():
    expected = "".join(Path(f"logs/{n}.log").read_text() for n in ("alpha", "beta", "gamma"))
    assert Path("all.log").read_text() == expected
