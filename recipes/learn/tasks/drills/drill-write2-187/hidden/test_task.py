"""Hidden checks of task drill-write2-187, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('item_range.txt')
    assert found == 'context-break', f"found {found!r}"


def test_second_content():
    found = content('match_break.txt')
    assert found == 'parse-context', f"found {found!r}"
