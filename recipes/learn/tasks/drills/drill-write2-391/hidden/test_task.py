"""Hidden checks of task drill-write2-391, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('form_equal.txt')
    assert found == 'break-file', f"found {found!r}"


def test_second_content():
    found = content('codes_flag.txt')
    assert found == 'codes-adjacent', f"found {found!r}"
