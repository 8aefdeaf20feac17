import os
import stat
import subprocess
import sys
from pathlib import Path

def test_main():
    assert Path("project/src/main.py").read_text() == 'print("hi")\n'


def test_tests_dir_empty():
    assert Path("project/tests").is_dir() and not os.listdir("project/tests")


def test_readme():
    assert Path("project/README.md").read_text().splitlines()[0] == "# project"


def test_main_runs():
    out = subprocess.run([sys.executable, "project/src/main.py"], capture_output=True, text=True)
    assert out.stdout == "hi\n"
