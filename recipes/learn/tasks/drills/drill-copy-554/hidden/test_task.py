"""Hidden checks of task drill-copy-554, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_copy_content():
    found = content('list_quick.txt')
    assert found == 'case-close', f"found {found!r}"


def test_source_unchanged():
    found = content('class_range.txt')
    assert found == 'case-close', f"found {found!r}"
