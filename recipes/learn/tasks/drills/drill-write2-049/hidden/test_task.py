"""Hidden checks of task drill-write2-049, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('mark_adjacent.txt')
    assert found == 'close-header', f"found {found!r}"


def test_second_content():
    found = content('break_codes.txt')
    assert found == 'scan-char', f"found {found!r}"
