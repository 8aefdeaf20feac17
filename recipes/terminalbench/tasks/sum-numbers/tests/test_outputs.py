import os
import stat
import subprocess
import sys
from pathlib import Path

def test_sum():
    numbers = [int(x) for x in Path("numbers.txt").read_text().split()]
    assert int(Path("sum.txt").read_text().strip()) == sum(numbers)
