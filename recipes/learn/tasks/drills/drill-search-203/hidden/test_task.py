"""Hidden checks of task drill-search-203, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_file_exists():
    found = content('data_case.txt')
    assert found is not None, f"found {found!r}"


def test_file_content():
    found = content('data_case.txt')
    assert found == 'blanks-case', f"found {found!r}"
