"""Hidden checks of task drill-write2-382, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('print_scan.txt')
    assert found == 'file-list', f"found {found!r}"


def test_second_content():
    found = content('pair_blanks.txt')
    assert found == 'blocks-group', f"found {found!r}"
