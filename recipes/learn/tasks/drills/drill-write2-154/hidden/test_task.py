"""Hidden checks of task drill-write2-154, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('form_close.txt')
    assert found == 'char-check', f"found {found!r}"


def test_second_content():
    found = content('make_file.txt')
    assert found == 'file-delete', f"found {found!r}"
