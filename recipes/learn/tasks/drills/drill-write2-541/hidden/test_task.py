"""Hidden checks of task drill-write2-541, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('class_header.txt')
    assert found == 'data-quick', f"found {found!r}"


def test_second_content():
    found = content('check_delete.txt')
    assert found == 'import-equal', f"found {found!r}"
