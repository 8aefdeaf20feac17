import os
import stat
import subprocess
import sys
from pathlib import Path

import hashlib


def test_sums():
    lines = Path("SHA256SUMS").read_text().splitlines()
    expected = [
        f"{hashlib.sha256(Path('files', n).read_bytes()).hexdigest()}  files/{n}"
        for n in sorted(os.listdir("files"))
    ]
    assert lines == expected
