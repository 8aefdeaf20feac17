"""Hidden checks of task drill-write2-349, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('group_chunks.txt')
    assert found == 'context-data', f"found {found!r}"


def test_second_content():
    found = content('break_check.txt')
    assert found == 'sort-parse', f"found {found!r}"
