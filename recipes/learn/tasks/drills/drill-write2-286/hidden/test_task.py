"""Hidden checks of task drill-write2-286, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('item_column.txt')
    assert found == 'encode-flag', f"found {found!r}"


def test_second_content():
    found = content('char_flag.txt')
    assert found == 'next-find', f"found {found!r}"
