"""Hidden checks of task drill-write2-412, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('match_side.txt')
    assert found == 'next-form', f"found {found!r}"


def test_second_content():
    found = content('equal_import.txt')
    assert found == 'header-long', f"found {found!r}"
