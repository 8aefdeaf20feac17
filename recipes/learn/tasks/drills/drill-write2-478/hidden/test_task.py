"""Hidden checks of task drill-write2-478, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('break_item.txt')
    assert found == 'context-column', f"found {found!r}"


def test_second_content():
    found = content('range_encode.txt')
    assert found == 'class-push', f"found {found!r}"
