"""Hidden checks of task drill-write2-175, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('form_size.txt')
    assert found == 'default-chunks', f"found {found!r}"


def test_second_content():
    found = content('print_item.txt')
    assert found == 'best-blanks', f"found {found!r}"
