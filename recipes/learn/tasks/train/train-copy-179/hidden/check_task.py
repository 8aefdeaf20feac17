"""Hidden checks of task train-copy-179: prints one line per check and "N passed, M failed"."""
from pathlib import Path

CHECKS = [
    ('copy_content', 'equals', 'make_equal.txt', 'find-case'),
    ('source_unchanged', 'equals', 'close_parse.txt', 'find-case'),
]


def content(path):
    file = Path(path)
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


passed = 0
for name, kind, path, expected in CHECKS:
    found = content(path)
    ok = found is not None if kind == "exists" else found == expected
    passed += ok
    print(("PASSED " if ok else "FAILED ") + name + ("" if ok else f": found {found!r}"))
print(f"{passed} passed, {len(CHECKS) - passed} failed")
