"""Hidden checks of task drill-write2-043, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('default_find.txt')
    assert found == 'class-print', f"found {found!r}"


def test_second_content():
    found = content('check_char.txt')
    assert found == 'class-sort', f"found {found!r}"
