"""Hidden checks of task drill-write2-509, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('check_make.txt')
    assert found == 'char-parse', f"found {found!r}"


def test_second_content():
    found = content('match_context.txt')
    assert found == 'chunks-header', f"found {found!r}"
