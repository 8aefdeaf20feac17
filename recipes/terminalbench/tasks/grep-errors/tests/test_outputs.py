import os
import stat
import subprocess
import sys
from pathlib import Path

def expected():
    return [line for line in Path("app.log").read_text().splitlines() if "ERROR" in line]


def test_errors():
    assert Path("errors.txt").read_text().splitlines() == expected()


def test_count():
    assert int(Path("error_count.txt").read_text()) == len(expected())
