"""Hidden checks of task drill-write2-214, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('item_quick.txt')
    assert found == 'class-header', f"found {found!r}"


def test_second_content():
    found = content('diff_parse.txt')
    assert found == 'best-char', f"found {found!r}"
