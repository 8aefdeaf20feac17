import os
import stat
import subprocess
import sys
from pathlib import Path

def test_count():
    assert Path("count.txt").read_text().strip() == "37"


def test_only_digits():
    assert Path("count.txt").read_text().strip().isdigit()
