"""Hidden checks of task drill-write2-106, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('list_size.txt')
    assert found == 'list-case', f"found {found!r}"


def test_second_content():
    found = content('best_find.txt')
    assert found == 'break-long', f"found {found!r}"
