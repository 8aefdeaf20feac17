"""Hidden checks of task drill-write2-515, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('range_blanks.txt')
    assert found == 'char-close', f"found {found!r}"


def test_second_content():
    found = content('list_chunks.txt')
    assert found == 'group-item', f"found {found!r}"
