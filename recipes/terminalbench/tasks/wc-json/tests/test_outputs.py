import os
import stat
import subprocess
import sys
from pathlib import Path

import json


def test_stats():
    text = Path("essay.txt").read_text()
    assert json.loads(Path("stats.json").read_text()) == {
        "lines": text.count("\n"),
        "words": len(text.split()),
        "chars": len(text.encode()),
    }
