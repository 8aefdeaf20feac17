"""Generate the built-in Terminal-Bench mini suite from `shell_tasks.py`.

    python recipes/terminalbench/make_tasks.py [--out recipes/terminalbench/tasks]

Terminal-Bench 1.x layout (``layout="tb"``)::

    task.yaml  Dockerfile  data/...  run-tests.sh  tests/test_outputs.py  solution.sh

Harbor layout (``layout="harbor"``)::

    task.toml  instruction.md  environment/Dockerfile  environment/data/...
    tests/test.sh  tests/test_outputs.py  solution/solve.sh

The Dockerfile's ``WORKDIR /app`` and ``COPY data/ /app/`` give the starting workspace. Tests run from
``/app`` with pytest (``-rA``, parsed by the ``pytest`` parser); Harbor's ``test.sh`` turns the pytest exit
status into ``/logs/verifier/reward.txt``. Deterministic: re-running changes nothing unless
`shell_tasks.py` changed. Add entries there to make more tasks.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shell_tasks import TASKS, ShellTask

CHECK_HEADER = "import os\nimport stat\nimport subprocess\nimport sys\nfrom pathlib import Path\n"

DOCKERFILE = """FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
WORKDIR /app
"""

RUN_TESTS = """#!/bin/bash
# Run the hidden tests from the task's working directory ($TEST_DIR holds this script and the tests).
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
python3 -m pytest -p no:cacheprovider -rA "$TEST_DIR/test_outputs.py"
"""

HARBOR_TEST = """#!/bin/bash
# Harbor verifier: run the tests from the working directory, then write the reward Harbor reads.
# TEST_DIR / VERIFIER_LOGS_DIR name /tests and /logs/verifier where a runner cannot mount them there.
TESTS="${TEST_DIR:-/tests}"
LOGS="${VERIFIER_LOGS_DIR:-/logs/verifier}"
mkdir -p "$LOGS"
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
if python3 -m pytest -p no:cacheprovider -rA "$TESTS/test_outputs.py"; then
  echo 1 > "$LOGS/reward.txt"
else
  echo 0 > "$LOGS/reward.txt"
fi
"""

TASK_TOML = """version = "1.0"

[metadata]
author_name = "Gyre"
author_email = "gyre@localhost"
difficulty = "easy"
category = "{category}"
tags = {tags}

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 1024
"""


def write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    path.chmod(mode)


def dockerfile(task: ShellTask) -> str:
    return DOCKERFILE + ("COPY data/ /app/\n" if task.files else "")


def write_data(task: ShellTask, context: Path) -> None:
    for rel, data in sorted(task.files.items()):
        write(context / "data" / rel, data)


def write_tb(task: ShellTask, folder: Path) -> None:
    config = {
        "instruction": task.instruction,
        "author_name": "Gyre",
        "author_email": "gyre@localhost",
        "difficulty": "easy",
        "category": task.category,
        "tags": list(task.tags) or [task.category],
        "parser_name": "pytest",
        "max_agent_timeout_sec": 300.0,
        "max_test_timeout_sec": 60.0,
        "run_tests_in_same_shell": False,
    }
    write(folder / "task.yaml", yaml.safe_dump(config, sort_keys=False, width=100))
    write(folder / "Dockerfile", dockerfile(task))
    write_data(task, folder)
    write(folder / "run-tests.sh", RUN_TESTS, 0o755)
    write(folder / "tests" / "test_outputs.py", CHECK_HEADER + task.checks)
    write(folder / "solution.sh", "#!/bin/bash\nset -euo pipefail\n" + task.solution, 0o755)


def write_harbor(task: ShellTask, folder: Path) -> None:
    tags = "[" + ", ".join(f'"{t}"' for t in (list(task.tags) or [task.category])) + "]"
    write(folder / "task.toml", TASK_TOML.format(category=task.category, tags=tags))
    write(folder / "instruction.md", task.instruction + "\n")
    write(folder / "environment" / "Dockerfile", dockerfile(task))
    write_data(task, folder / "environment")
    write(folder / "tests" / "test.sh", HARBOR_TEST, 0o755)
    write(folder / "tests" / "test_outputs.py", CHECK_HEADER + task.checks)
    write(folder / "solution" / "solve.sh", "#!/bin/bash\nset -euo pipefail\n" + task.solution, 0o755)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "tasks"))
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # Starting files such as dos.txt must keep their bytes (CRLF) through git checkouts.
    write(out / ".gitattributes", "* -text\n")
    names = [t.name for t in TASKS]
    if len(set(names)) != len(names):
        raise SystemExit("task names must be unique")
    for task in TASKS:
        (write_harbor if task.layout == "harbor" else write_tb)(task, out / task.name)
    harbor = sum(t.layout == "harbor" for t in TASKS)
    print(f"wrote {len(TASKS)} tasks ({len(TASKS) - harbor} Terminal-Bench 1.x, {harbor} Harbor) to {out}")


if __name__ == "__main__":
    main()
