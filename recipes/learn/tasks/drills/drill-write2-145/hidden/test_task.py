"""Hidden checks of task drill-write2-145, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('long_chunks.txt')
    assert found == 'parse-char', f"found {found!r}"


def test_second_content():
    found = content('default_char.txt')
    assert found == 'parse-blanks', f"found {found!r}"
