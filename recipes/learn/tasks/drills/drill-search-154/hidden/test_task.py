"""Hidden checks of task drill-search-154, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_file_exists():
    found = content('break_class.txt')
    assert found is not None, f"found {found!r}"


def test_file_content():
    found = content('break_class.txt')
    assert found == 'header-data', f"found {found!r}"
