"""Hidden checks of task drill-write2-220, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('best_quick.txt')
    assert found == 'match-check', f"found {found!r}"


def test_second_content():
    found = content('range_column.txt')
    assert found == 'parse-diff', f"found {found!r}"
