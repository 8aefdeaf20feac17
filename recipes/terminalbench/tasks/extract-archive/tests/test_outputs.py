import os
import stat
import subprocess
import sys
from pathlib import Path

def test_extracted():
    assert Path("out/release/config.json").is_file()
    assert Path("out/release/bin/tool.sh").is_file()


def test_version():
    assert Path("version.txt").read_text().strip() == "2.4.1"
