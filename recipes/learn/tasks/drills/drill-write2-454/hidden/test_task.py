"""Hidden checks of task drill-write2-454, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('push_find.txt')
    assert found == 'side-check', f"found {found!r}"


def test_second_content():
    found = content('codes_case.txt')
    assert found == 'blocks-scan', f"found {found!r}"
