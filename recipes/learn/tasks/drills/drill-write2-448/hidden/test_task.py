"""Hidden checks of task drill-write2-448, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('adjacent_mark.txt')
    assert found == 'char-form', f"found {found!r}"


def test_second_content():
    found = content('file_quick.txt')
    assert found == 'class-best', f"found {found!r}"
