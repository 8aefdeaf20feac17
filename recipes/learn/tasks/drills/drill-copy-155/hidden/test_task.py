"""Hidden checks of task drill-copy-155, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_copy_content():
    found = content('find_scan.txt')
    assert found == 'encode-import', f"found {found!r}"


def test_source_unchanged():
    found = content('push_class.txt')
    assert found == 'encode-import', f"found {found!r}"
