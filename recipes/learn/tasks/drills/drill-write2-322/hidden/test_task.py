"""Hidden checks of task drill-write2-322, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('flag_codes.txt')
    assert found == 'find-long', f"found {found!r}"


def test_second_content():
    found = content('decode_range.txt')
    assert found == 'codes-size', f"found {found!r}"
