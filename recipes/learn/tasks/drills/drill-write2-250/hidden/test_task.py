"""Hidden checks of task drill-write2-250, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('char_equal.txt')
    assert found == 'flag-context', f"found {found!r}"


def test_second_content():
    found = content('begin_import.txt')
    assert found == 'list-close', f"found {found!r}"
