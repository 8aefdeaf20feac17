"""Hidden checks of task drill-write2-169, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('next_parse.txt')
    assert found == 'begin-form', f"found {found!r}"


def test_second_content():
    found = content('print_form.txt')
    assert found == 'equal-size', f"found {found!r}"
