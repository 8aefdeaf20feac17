"""Hidden checks of task drill-write2-079, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('form_equal.txt')
    assert found == 'push-chunks', f"found {found!r}"


def test_second_content():
    found = content('make_best.txt')
    assert found == 'equal-form', f"found {found!r}"
