"""Hidden checks of task drill-write2-385, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('file_sort.txt')
    assert found == 'check-next', f"found {found!r}"


def test_second_content():
    found = content('data_item.txt')
    assert found == 'check-context', f"found {found!r}"
