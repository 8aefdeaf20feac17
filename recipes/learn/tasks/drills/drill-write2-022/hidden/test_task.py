"""Hidden checks of task drill-write2-022, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('chunks_long.txt')
    assert found == 'blocks-scan', f"found {found!r}"


def test_second_content():
    found = content('case_size.txt')
    assert found == 'scan-blanks', f"found {found!r}"
