"""Hidden checks of task drill-write2-508, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('equal_blocks.txt')
    assert found == 'match-mark', f"found {found!r}"


def test_second_content():
    found = content('find_push.txt')
    assert found == 'file-decode', f"found {found!r}"
