"""Hidden checks of task drill-write2-172, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('break_sort.txt')
    assert found == 'group-sort', f"found {found!r}"


def test_second_content():
    found = content('encode_mark.txt')
    assert found == 'next-long', f"found {found!r}"
