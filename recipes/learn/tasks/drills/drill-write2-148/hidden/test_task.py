"""Hidden checks of task drill-write2-148, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('adjacent_decode.txt')
    assert found == 'blocks-column', f"found {found!r}"


def test_second_content():
    found = content('flag_class.txt')
    assert found == 'encode-size', f"found {found!r}"
