import os
import stat
import subprocess
import sys
from pathlib import Path

def test_file_exists():
    assert Path("hello.txt").is_file()


def test_exact_content():
    assert Path("hello.txt").read_text() == "Hello, world!\n"
