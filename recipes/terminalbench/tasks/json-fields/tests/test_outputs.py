import os
import stat
import subprocess
import sys
from pathlib import Path

def test_name():
    assert Path("name.txt").read_text() == "Grace Hopper\n"


def test_email():
    assert Path("email.txt").read_text() == "grace.hopper@navy.mil\n"
