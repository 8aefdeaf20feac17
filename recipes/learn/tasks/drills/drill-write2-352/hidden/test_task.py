"""Hidden checks of task drill-write2-352, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('data_make.txt')
    assert found == 'diff-find', f"found {found!r}"


def test_second_content():
    found = content('blocks_break.txt')
    assert found == 'make-equal', f"found {found!r}"
