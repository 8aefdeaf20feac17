"""Hidden checks of task drill-write2-370, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('import_file.txt')
    assert found == 'equal-file', f"found {found!r}"


def test_second_content():
    found = content('form_pair.txt')
    assert found == 'group-data', f"found {found!r}"
