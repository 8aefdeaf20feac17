"""Hidden checks of task drill-write2-475, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('default_match.txt')
    assert found == 'next-equal', f"found {found!r}"


def test_second_content():
    found = content('break_make.txt')
    assert found == 'adjacent-pair', f"found {found!r}"
