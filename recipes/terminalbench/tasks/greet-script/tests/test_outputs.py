import os
import stat
import subprocess
import sys
from pathlib import Path

def run(*args):
    return subprocess.run(["./greet.sh", *args], capture_output=True, text=True).stdout


def test_named():
    assert run("Ada") == "Hello, Ada!\n"


def test_default():
    assert run() == "Hello, world!\n"
