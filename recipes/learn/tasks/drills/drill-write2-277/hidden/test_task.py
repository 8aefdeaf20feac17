"""Hidden checks of task drill-write2-277, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('long_import.txt')
    assert found == 'print-parse', f"found {found!r}"


def test_second_content():
    found = content('item_push.txt')
    assert found == 'push-close', f"found {found!r}"
