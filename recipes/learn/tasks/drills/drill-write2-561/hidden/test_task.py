"""Hidden checks of task drill-write2-561, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('side_data.txt')
    assert found == 'blocks-pair', f"found {found!r}"


def test_second_content():
    found = content('find_range.txt')
    assert found == 'make-find', f"found {found!r}"
