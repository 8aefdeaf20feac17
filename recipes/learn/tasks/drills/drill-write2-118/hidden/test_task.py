"""Hidden checks of task drill-write2-118, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('flag_side.txt')
    assert found == 'column-match', f"found {found!r}"


def test_second_content():
    found = content('print_decode.txt')
    assert found == 'delete-check', f"found {found!r}"
