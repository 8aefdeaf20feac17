"""Hidden checks of task drill-write2-211, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('long_best.txt')
    assert found == 'group-file', f"found {found!r}"


def test_second_content():
    found = content('item_group.txt')
    assert found == 'quick-size', f"found {found!r}"
