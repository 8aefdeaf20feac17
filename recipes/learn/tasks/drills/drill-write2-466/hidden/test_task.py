"""Hidden checks of task drill-write2-466, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('pair_match.txt')
    assert found == 'long-parse', f"found {found!r}"


def test_second_content():
    found = content('data_sort.txt')
    assert found == 'encode-diff', f"found {found!r}"
