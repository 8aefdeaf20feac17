"""Hidden checks of task drill-write2-067, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('file_push.txt')
    assert found == 'form-decode', f"found {found!r}"


def test_second_content():
    found = content('print_next.txt')
    assert found == 'sort-import', f"found {found!r}"
