"""Hidden checks of task drill-write2-100, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


def test_first_content():
    found = content('quick_data.txt')
    assert found == 'check-class', f"found {found!r}"


def test_second_content():
    found = content('diff_chunks.txt')
    assert found == 'file-side', f"found {found!r}"
