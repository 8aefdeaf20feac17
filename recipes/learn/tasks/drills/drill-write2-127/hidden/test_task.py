"""Hidden checks of task drill-write2-127, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('size_codes.txt')
    assert found == 'range-data', f"found {found!r}"


def test_second_content():
    found = content('quick_close.txt')
    assert found == 'file-make', f"found {found!r}"
