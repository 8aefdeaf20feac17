"""Hidden checks of task drill-write2-364, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('blanks_break.txt')
    assert found == 'parse-header', f"found {found!r}"


def test_second_content():
    found = content('quick_pair.txt')
    assert found == 'context-long', f"found {found!r}"
