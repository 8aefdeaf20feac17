import os
import stat
import subprocess
import sys
from pathlib import Path

import zipfile


def test_zip():
    with zipfile.ZipFile("bundle.zip") as archive:
        assert sorted(archive.namelist()) == ["data.csv", "report.txt"]
        assert archive.read("data.csv") == b"a,b\n1,2\n"
