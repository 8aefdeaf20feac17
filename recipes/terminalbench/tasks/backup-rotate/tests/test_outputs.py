import os
import stat
import subprocess
import sys
from pathlib import Path

def test_rotated():
    assert sorted(os.listdir("backups")) == [
        "README", "backup-20250104.tar", "backup-20250106.tar", "backup-20250108.tar",
    ]
