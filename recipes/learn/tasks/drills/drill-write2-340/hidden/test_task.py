"""Hidden checks of task drill-write2-340, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('diff_print.txt')
    assert found == 'size-default', f"found {found!r}"


def test_second_content():
    found = content('header_adjacent.txt')
    assert found == 'item-match', f"found {found!r}"
