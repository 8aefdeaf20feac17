"""Hidden checks of task drill-write2-484, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('column_form.txt')
    assert found == 'group-chunks', f"found {found!r}"


def test_second_content():
    found = content('delete_blocks.txt')
    assert found == 'scan-flag', f"found {found!r}"
