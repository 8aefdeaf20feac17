"""Hidden checks of task drill-write2-328, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('parse_push.txt')
    assert found == 'make-sort', f"found {found!r}"


def test_second_content():
    found = content('import_list.txt')
    assert found == 'list-decode', f"found {found!r}"
