"""Hidden checks of task drill-write2-520, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('item_equal.txt')
    assert found == 'find-class', f"found {found!r}"


def test_second_content():
    found = content('check_size.txt')
    assert found == 'check-group', f"found {found!r}"
