import os
import stat
import subprocess
import sys
from pathlib import Path

def test_upper():
    assert Path("POEM.txt").read_text() == "THE FOG COMES\nON LITTLE CAT FEET.\n"


def test_original_kept():
    assert Path("poem.txt").read_text() == "The fog comes\non little cat feet.\n"
