import os
import stat
import subprocess
import sys
from pathlib import Path

EXPECTED = "[db]\nhost=db.production.local\nname=app_production\n\n[web]\nurl=https://production.example.com\nworkers=4\n"


def test_replaced():
    assert "staging" not in Path("config.ini").read_text()


def test_rest_unchanged():
    assert Path("config.ini").read_text() == EXPECTED
