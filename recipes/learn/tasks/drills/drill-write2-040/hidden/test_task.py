"""Hidden checks of task drill-write2-040, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('form_item.txt')
    assert found == 'match-header', f"found {found!r}"


def test_second_content():
    found = content('char_form.txt')
    assert found == 'chunks-range', f"found {found!r}"
