"""Hidden checks of task drill-write2-547, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('scan_item.txt')
    assert found == 'list-item', f"found {found!r}"


def test_second_content():
    found = content('adjacent_next.txt')
    assert found == 'range-parse', f"found {found!r}"
