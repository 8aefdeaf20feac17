"""Hidden checks of task drill-write2-274, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('close_size.txt')
    assert found == 'side-make', f"found {found!r}"


def test_second_content():
    found = content('import_delete.txt')
    assert found == 'group-parse', f"found {found!r}"
