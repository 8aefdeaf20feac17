"""Hidden checks of task drill-write2-016, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('delete_class.txt')
    assert found == 'equal-blanks', f"found {found!r}"


def test_second_content():
    found = content('size_data.txt')
    assert found == 'push-context', f"found {found!r}"
