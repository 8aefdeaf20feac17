import os
import stat
import subprocess
import sys
from pathlib import Path

def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_secret_mode():
    assert mode("secret.txt") == 0o600


def test_public_modes():
    assert mode("public") == 0o755
    assert mode("public/index.html") == 0o644


def test_contents_unchanged():
    assert Path("secret.txt").read_text() == "token=abc123\n"
