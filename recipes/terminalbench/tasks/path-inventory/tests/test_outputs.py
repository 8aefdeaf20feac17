import os
import stat
import subprocess
import sys
from pathlib import Path

def test_inventory():
    assert Path("inventory.txt").read_text().splitlines() == ["css/main.css", "index.html", "js/app.js", "js/lib/x.js"]
