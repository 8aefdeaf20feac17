"""Generate the built-in NL2Repo mini suite: NL2RepoBench task folders.

    python recipes/nl2repo/make_tasks.py [--out recipes/nl2repo/tasks]

One folder per library of `libraries.py`, in NL2RepoBench's layout:

    start.md              the specification (the agent's instruction)
    test_case_count.txt   the number of hidden tests (the score's denominator)
    test_commands.json    ["pip install -e .", "<pytest command>"] (Gyre skips the install offline)
    test_files.json       ["tests/test_<name>.py"]
    hidden/tests/...      the hidden tests (NL2RepoBench keeps them in its Docker images)
    reference/            the reference implementation, with a pyproject.toml like an agent would write

The count is not written by hand: the script runs the hidden tests against the reference and requires
all of them to pass (and 5 to 30 of them). Deterministic: re-running changes nothing unless
`libraries.py` changed. Add entries to `libraries.py` to make more tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from libraries import LIBRARIES, Library

from gyre.envs.testlog import parse_pytest

TEST_COMMAND = (
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -p no:cacheprovider --continue-on-collection-errors -rA tests"
)

PREAMBLE = """# {title}

Write a small Python library from scratch in the current (empty) repository, using only the Python
standard library. It must be importable from the repository root (no installation step is needed; a
`pyproject.toml` is optional). A hidden pytest suite will be run against it.

## Specification

"""


def pyproject(name: str) -> str:
    return f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.9"\n'


def count_tests(library: Library) -> int:
    folder = Path(tempfile.mkdtemp(prefix="gyre-nl2repo-"))
    try:
        for rel, text in library.files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        (folder / "tests").mkdir()
        (folder / "tests" / f"test_{library.name}.py").write_text(library.tests)
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        statuses = parse_pytest(done.stdout)
        failed = {t: s for t, s in statuses.items() if s != "PASSED"}
        if done.returncode != 0 or failed or not statuses:
            raise SystemExit(f"{library.name}: the reference fails its tests:\n{done.stdout[-3000:]}")
        return len(statuses)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_task(library: Library, out: Path) -> int:
    count = count_tests(library)
    if not 5 <= count <= 30:
        raise SystemExit(f"{library.name}: {count} tests; the suite wants 5 to 30")
    folder = out / library.name
    test_file = f"tests/test_{library.name}.py"
    (folder / "hidden" / "tests").mkdir(parents=True)
    (folder / "start.md").write_text(PREAMBLE.format(title=library.title.capitalize()) + library.spec)
    (folder / "test_case_count.txt").write_text(f"{count}\n")
    (folder / "test_commands.json").write_text(json.dumps(["pip install -e .", TEST_COMMAND]) + "\n")
    (folder / "test_files.json").write_text(json.dumps([test_file]) + "\n")
    (folder / "hidden" / test_file).write_text(library.tests)
    for rel, text in library.files.items():
        (folder / "reference" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "reference" / rel).write_text(text)
    (folder / "reference" / "pyproject.toml").write_text(pyproject(library.name))
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "tasks"))
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    names = [lib.name for lib in LIBRARIES]
    if len(set(names)) != len(names):
        raise SystemExit("library names must be unique")
    for library in LIBRARIES:
        print(f"{library.name}: {write_task(library, out)} tests")
    print(f"wrote {len(LIBRARIES)} tasks to {out}")


if __name__ == "__main__":
    main()
