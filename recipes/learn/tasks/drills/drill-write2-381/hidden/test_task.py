"""Hidden checks of task drill-write2-381, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('column_make.txt')
    assert found == 'close-next', f"found {found!r}"


def test_second_content():
    found = content('sort_long.txt')
    assert found == 'column-print', f"found {found!r}"
