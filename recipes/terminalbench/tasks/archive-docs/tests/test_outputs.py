import os
import stat
import subprocess
import sys
from pathlib import Path

import tarfile


def test_archive_members():
    with tarfile.open("docs.tar.gz", "r:gz") as archive:
        names = set(archive.getnames())
    assert {"docs/intro.md", "docs/usage.md", "docs/faq.md"} <= names


def test_archive_content():
    with tarfile.open("docs.tar.gz", "r:gz") as archive:
        assert archive.extractfile("docs/usage.md").read() == b"# Usage\nRun it.\n"
