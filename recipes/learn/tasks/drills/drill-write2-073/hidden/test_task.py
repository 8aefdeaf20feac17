"""Hidden checks of task drill-write2-073, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('mark_codes.txt')
    assert found == 'flag-check', f"found {found!r}"


def test_second_content():
    found = content('chunks_delete.txt')
    assert found == 'begin-make', f"found {found!r}"
