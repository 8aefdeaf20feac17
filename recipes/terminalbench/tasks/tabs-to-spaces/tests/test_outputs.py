import os
import stat
import subprocess
import sys
from pathlib import Path

def test_spaces():
    assert Path("code.txt").read_text() == "def f():\n    return 1\n\nif x:\n        pass\n"
