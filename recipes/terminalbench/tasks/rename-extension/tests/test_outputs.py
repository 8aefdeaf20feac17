import os
import stat
import subprocess
import sys
from pathlib import Path

def test_renamed():
    assert sorted(os.listdir("images")) == ["cat.jpg", "dog.jpg", "logo.png"]


def test_content_kept():
    assert Path("images/dog.jpg").read_text() == "dog\n"
