import os
import stat
import subprocess
import sys
from pathlib import Path

def test_chunks():
    assert sorted(os.listdir("parts")) == ["chunk_aa", "chunk_ab", "chunk_ac"]
    assert len(Path("parts/chunk_ab").read_text().splitlines()) == 10
    assert Path("parts/chunk_ac").read_text() == "".join(f"line {i}\n" for i in range(21, 26))
