"""Hidden checks of task drill-write2-550, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('push_make.txt')
    assert found == 'file-best', f"found {found!r}"


def test_second_content():
    found = content('check_begin.txt')
    assert found == 'close-size', f"found {found!r}"
