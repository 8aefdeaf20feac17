import os
import stat
import subprocess
import sys
from pathlib import Path

def test_is_symlink():
    assert os.path.islink("latest")


def test_target():
    assert os.readlink("latest") == "releases/v2"
    assert Path("latest/VERSION").read_text() == "2\n"
