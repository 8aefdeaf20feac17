"""Hidden checks of task drill-write2-112, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('sort_equal.txt')
    assert found == 'pair-chunks', f"found {found!r}"


def test_second_content():
    found = content('context_side.txt')
    assert found == 'encode-parse', f"found {found!r}"
