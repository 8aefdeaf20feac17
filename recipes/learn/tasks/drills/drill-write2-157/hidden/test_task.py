"""Hidden checks of task drill-write2-157, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('encode_list.txt')
    assert found == 'quick-next', f"found {found!r}"


def test_second_content():
    found = content('check_blanks.txt')
    assert found == 'file-char', f"found {found!r}"
