"""Hidden checks of task drill-write2-379, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('equal_long.txt')
    assert found == 'break-form', f"found {found!r}"


def test_second_content():
    found = content('begin_context.txt')
    assert found == 'equal-data', f"found {found!r}"
