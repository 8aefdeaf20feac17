import os
import stat
import subprocess
import sys
from pathlib import Path

def test_decoded():
    assert Path("secret.txt").read_text() == "the password is swordfish\n"
