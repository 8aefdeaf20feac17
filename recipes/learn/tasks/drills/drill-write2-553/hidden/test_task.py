"""Hidden checks of task drill-write2-553, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('context_data.txt')
    assert found == 'pair-match', f"found {found!r}"


def test_second_content():
    found = content('chunks_encode.txt')
    assert found == 'column-codes', f"found {found!r}"
