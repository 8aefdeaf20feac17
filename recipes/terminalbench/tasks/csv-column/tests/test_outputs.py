import os
import stat
import subprocess
import sys
from pathlib import Path

def test_cities():
    rows = [line.split(",") for line in Path("people.csv").read_text().splitlines()[1:]]
    assert Path("cities.txt").read_text().splitlines() == [row[2] for row in rows]
