"""Hidden checks of task drill-write2-019, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('range_chunks.txt')
    assert found == 'sort-default', f"found {found!r}"


def test_second_content():
    found = content('form_find.txt')
    assert found == 'best-class', f"found {found!r}"
