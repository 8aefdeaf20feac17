"""Hidden checks of task drill-write2-439, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('import_case.txt')
    assert found == 'match-next', f"found {found!r}"


def test_second_content():
    found = content('blocks_chunks.txt')
    assert found == 'long-blanks', f"found {found!r}"
