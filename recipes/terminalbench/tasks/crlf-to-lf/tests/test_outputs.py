import os
import stat
import subprocess
import sys
from pathlib import Path

def test_no_carriage_returns():
    assert b"\r" not in Path("dos.txt").read_bytes()


def test_content():
    assert Path("dos.txt").read_bytes() == b"first line\nsecond line\nthird\tline\n"
