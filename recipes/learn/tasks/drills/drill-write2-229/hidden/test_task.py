"""Hidden checks of task drill-write2-229, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('list_context.txt')
    assert found == 'blanks-group', f"found {found!r}"


def test_second_content():
    found = content('group_chunks.txt')
    assert found == 'decode-char', f"found {found!r}"
