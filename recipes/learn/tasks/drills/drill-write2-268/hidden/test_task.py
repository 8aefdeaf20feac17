"""Hidden checks of task drill-write2-268, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('diff_group.txt')
    assert found == 'size-delete', f"found {found!r}"


def test_second_content():
    found = content('codes_best.txt')
    assert found == 'list-encode', f"found {found!r}"
