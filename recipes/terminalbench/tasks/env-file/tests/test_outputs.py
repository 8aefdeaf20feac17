import os
import stat
import subprocess
import sys
from pathlib import Path

def test_env():
    assert Path(".env").read_text() == "DB_HOST=localhost\nDB_PORT=5432\nDEBUG=\nSECRET_KEY=s3cr3t\n"
