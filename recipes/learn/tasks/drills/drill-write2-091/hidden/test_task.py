"""Hidden checks of task drill-write2-091, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('scan_sort.txt')
    assert found == 'side-match', f"found {found!r}"


def test_second_content():
    found = content('range_break.txt')
    assert found == 'flag-chunks', f"found {found!r}"
