"""Hidden checks of task drill-write2-202, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('parse_column.txt')
    assert found == 'case-side', f"found {found!r}"


def test_second_content():
    found = content('file_data.txt')
    assert found == 'side-case', f"found {found!r}"
