"""Hidden checks of task drill-write2-076, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('parse_scan.txt')
    assert found == 'print-import', f"found {found!r}"


def test_second_content():
    found = content('push_delete.txt')
    assert found == 'class-match', f"found {found!r}"
