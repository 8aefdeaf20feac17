"""Hidden checks of task drill-write2-421, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('case_sort.txt')
    assert found == 'break-form', f"found {found!r}"


def test_second_content():
    found = content('mark_import.txt')
    assert found == 'sort-side', f"found {found!r}"
