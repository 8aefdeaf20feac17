"""Hidden checks of task drill-write2-307, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('data_push.txt')
    assert found == 'side-codes', f"found {found!r}"


def test_second_content():
    found = content('header_import.txt')
    assert found == 'close-best', f"found {found!r}"
