"""Hidden checks of task drill-write2-025, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('codes_delete.txt')
    assert found == 'form-list', f"found {found!r}"


def test_second_content():
    found = content('pair_char.txt')
    assert found == 'best-context', f"found {found!r}"
