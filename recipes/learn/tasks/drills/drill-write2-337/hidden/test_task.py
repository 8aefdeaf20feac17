"""Hidden checks of task drill-write2-337, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('blocks_file.txt')
    assert found == 'char-find', f"found {found!r}"


def test_second_content():
    found = content('column_sort.txt')
    assert found == 'import-range', f"found {found!r}"
