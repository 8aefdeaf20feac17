"""Hidden checks of task drill-write2-070, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('context_flag.txt')
    assert found == 'default-print', f"found {found!r}"


def test_second_content():
    found = content('default_column.txt')
    assert found == 'push-column', f"found {found!r}"
