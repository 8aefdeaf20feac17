"""Hidden checks of task drill-write2-526, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('encode_file.txt')
    assert found == 'check-pair', f"found {found!r}"


def test_second_content():
    found = content('push_scan.txt')
    assert found == 'context-find', f"found {found!r}"
